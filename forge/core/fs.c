/*
 * fs.c: the file-system steps of fs.h.
 *
 * Every write loops: a single write(2) may move fewer bytes than asked (Linux
 * caps one call at 0x7ffff000 bytes), and a loop that trusts one call fails
 * on the first multi-GB tensor with a stale errno.  Durability follows one
 * recipe: write a temporary name in the destination's folder, fsync it,
 * rename it, fsync the folder.
 */
#include "forge/core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#define COPY_CHUNK (4u << 20) /* the read/write fallback's buffer */

/* Makes temporary names unique between threads of one process. */
static unsigned long tmp_seq;

int fg_fs_write_errcode(int e)
{
	if (e == ENOSPC || e == EDQUOT)
		return FG_ENOSPC;
	return e == ENOMEM ? FG_ENOMEM : FG_EINPUT;
}

int fg_fs_write_all(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len) {
		ssize_t put = write(fd, p, len > FG_FS_WRITE_CHUNK ? FG_FS_WRITE_CHUNK : len);

		if (put < 0 && errno == EINTR)
			continue;
		if (put < 0)
			return -errno;
		if (put == 0) {
			errno = EIO;
			return -EIO;
		}
		p += put;
		len -= (size_t)put;
	}
	return 0;
}

int fg_fs_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

int fg_fs_fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash)
		return fg_fs_fsync_dir(".");
	n = slash == path ? 1 : (size_t)(slash - path); /* "/x" lives in "/" */
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return fg_fs_fsync_dir(dir);
}

/* mkdir that accepts an existing folder. */
static int mkdir_one(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -ENOTDIR;
	}
	return 0;
}

int fg_fs_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	int rc;

	if (n == 0)
		return -ENOENT;
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *c = buf + 1; *c; c++) {
		if (*c != '/' || c[-1] == '/')
			continue;
		*c = '\0';
		rc = mkdir_one(buf, mode);
		*c = '/';
		if (rc)
			return rc;
	}
	return mkdir_one(buf, mode);
}

int fg_fs_join(char *buf, size_t len, const char *dir, const char *name, struct fg_err *err)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len)
		return fg_err_set(err, FG_EUSAGE, "path too long: %s/%s", dir, name);
	return 0;
}

/* nftw stops at the first non-zero return and passes it on: the errno, positive. */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path) == 0 ? 0 : errno;
}

int fg_fs_rm_rf(const char *path)
{
	struct stat st;
	int rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	rc = nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc > 0 ? -rc : rc < 0 ? -errno : 0;
}

/* Copy the rest of in to out: copy_file_range while it serves, then read/write to EOF.  0 or -errno. */
static int copy_fd(int in, int out, uint64_t size)
{
	uint64_t copied = 0;
	char *buf;
	int rc = 0;

	while (copied < size) {
		uint64_t want = size - copied;
		ssize_t n = copy_file_range(in, NULL, out, NULL,
					    want > FG_FS_WRITE_CHUNK ? FG_FS_WRITE_CHUNK : (size_t)want, 0);

		if (n > 0) {
			copied += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		/*
		 * Nothing copied where bytes remain (a file system that serves none,
		 * such as procfs), or a pair of files it does not support: the
		 * offsets moved with what was copied, so read/write takes over.
		 */
		if (n == 0 || errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP ||
		    errno == EPERM) /* EPERM: a seccomp filter */
			break;
		return -errno;
	}
	buf = malloc(COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t got = read(in, buf, COPY_CHUNK);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			break;
		}
		if (got == 0)
			break;
		rc = fg_fs_write_all(out, buf, (size_t)got);
		if (rc)
			break;
	}
	free(buf);
	return rc;
}

/*
 * Copy src to dst, a new file created read-only (0444 less the umask), so the
 * copy is as immutable as a hard link made read-only; copy_fd reflinks on XFS
 * and btrfs and copies server-side on NFS where copy_file_range serves.
 */
static int copy_file(const char *src, const char *dst, struct fg_err *err)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	struct stat st;

	if (in < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", src, strerror(errno));
	if (fstat(in, &st) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot stat: %s", src, strerror(errno));
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (out < 0) {
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot create: %s", dst, strerror(errno));
		goto out;
	}
	rc = copy_fd(in, out, st.st_size > 0 ? (uint64_t)st.st_size : 0);
	if (rc)
		rc = fg_err_set(err, fg_fs_write_errcode(-rc), "%s: cannot copy from %s: %s", dst, src,
				strerror(-rc));
	else if (fsync(out) != 0)
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: fsync: %s", dst, strerror(errno));
out:
	if (out >= 0) {
		close(out);
		if (rc)
			unlink(dst);
	}
	close(in);
	return rc;
}

int fg_fs_link_or_copy(const char *src, const char *dst, struct fg_err *err)
{
	struct stat st;

	if (link(src, dst) == 0) {
		/*
		 * A link shares the source's inode, so it is made read-only (the
		 * source's name loses its write bits too): nothing writing through
		 * either name can change an artifact's bytes behind its
		 * fingerprints.  When the inode is not ours to change (a file of
		 * another user), the artifact gets a copy instead.
		 */
		if (stat(dst, &st) == 0 && (!(st.st_mode & 0222) || chmod(dst, st.st_mode & 07555) == 0))
			return 0;
		unlink(dst);
	} else if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot link from %s: %s",
				  dst, src, strerror(errno));
	}
	return copy_file(src, dst, err);
}

int fg_fs_link_or_copy_fd(int in, const char *label, const char *dst, struct fg_err *err)
{
	char proc[64];
	struct stat st;
	int out, rc;

	if (fstat(in, &st) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot stat: %s", label, strerror(errno));
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", in);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) == 0) {
		/* Read-only like fg_fs_link_or_copy's links; a copy when the inode is not ours. */
		if (!(st.st_mode & 0222) || fchmod(in, st.st_mode & 07555) == 0)
			return 0;
		unlink(dst);
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (out < 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot create: %s", dst, strerror(errno));
	if (lseek(in, 0, SEEK_SET) < 0) {
		rc = -errno;
	} else {
		rc = copy_fd(in, out, st.st_size > 0 ? (uint64_t)st.st_size : 0);
	}
	if (rc)
		rc = fg_err_set(err, fg_fs_write_errcode(-rc), "%s: cannot copy from %s: %s", dst, label,
				strerror(-rc));
	else if (fsync(out) != 0)
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: fsync: %s", dst, strerror(errno));
	close(out);
	if (rc)
		unlink(dst);
	return rc;
}

int fg_fs_atomic_open(struct fg_fs_atomic *a, const char *path, struct fg_err *err)
{
	const char *base = strrchr(path, '/');
	int n;

	a->fd = -1;
	a->created = 0;
	a->path = path;
	base = base ? base + 1 : path;
	n = snprintf(a->tmp, sizeof(a->tmp), "%.*s.%s.tmp-%ld-%lu", (int)(base - path), path, base, (long)getpid(),
		     __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	if (n < 0 || (size_t)n >= sizeof(a->tmp))
		return fg_err_set(err, FG_EUSAGE, "%s: path too long", path);
	a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (a->fd < 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot create temporary file: %s", a->tmp,
				  strerror(errno));
	a->created = 1;
	return 0;
}

int fg_fs_atomic_commit(struct fg_fs_atomic *a, struct fg_err *err)
{
	int rc;

	if (fsync(a->fd) != 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: fsync: %s", a->tmp, strerror(errno));
	rc = close(a->fd);
	a->fd = -1;
	if (rc != 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: close: %s", a->tmp, strerror(errno));
	if (rename(a->tmp, a->path) != 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot rename into place: %s", a->path,
				  strerror(errno));
	a->created = 0; /* it is path now */
	rc = fg_fs_fsync_parent(a->path);
	if (rc)
		return fg_err_set(err, fg_fs_write_errcode(-rc), "%s: fsync of the folder: %s", a->path,
				  strerror(-rc));
	return 0;
}

void fg_fs_atomic_abort(struct fg_fs_atomic *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	if (a->created)
		unlink(a->tmp);
	a->created = 0;
}

int fg_fs_write_atomic(const char *path, const void *data, size_t len, struct fg_err *err)
{
	struct fg_fs_atomic a;
	int rc = fg_fs_atomic_open(&a, path, err);

	if (!rc && (rc = fg_fs_write_all(a.fd, data, len)) != 0)
		rc = fg_err_set(err, fg_fs_write_errcode(-rc), "%s: write: %s", a.tmp, strerror(-rc));
	if (!rc)
		rc = fg_fs_atomic_commit(&a, err);
	fg_fs_atomic_abort(&a);
	return rc;
}

/* ---- opening files beneath a folder ---- */

int fg_fs_confined_relpath(const char *p)
{
	const char *s = p;

	if (!*p || *p == '/')
		return 0;
	while (*s) {
		size_t len = strcspn(s, "/");

		if (len == 0 || (len == 2 && s[0] == '.' && s[1] == '.') || (len == 1 && s[0] == '.'))
			return 0;
		s += len;
		if (*s == '/')
			s++;
	}
	return 1;
}

const char *fg_fs_open_why(int rc)
{
	switch (rc) {
	case FG_FS_SYMLINK:
		return "is a symbolic link (refused: files beneath a checkpoint folder are opened without following links)";
	case FG_FS_NOT_REGULAR:
		return "is not a regular file (a FIFO, device, socket or folder)";
	case FG_FS_OUTSIDE:
		return "is a symbolic link to a file outside the allowed folders";
	case -EINVAL:
		return "is not a path inside the folder";
	default:
		return strerror(-rc);
	}
}

#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

/* openat2 beneath dirfd, no links: fd, -errno, or -ENOSYS when the kernel (or a filter) lacks it. */
static int open_resolved(int dirfd, const char *rel)
{
	struct open_how how;
	long fd;

	memset(&how, 0, sizeof(how));
	how.flags = OPEN_FLAGS;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	do
		fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOSYS || errno == EPERM || errno == E2BIG)
		return -ENOSYS;
	return -errno;
}

/* The fallback: one openat per part, O_NOFOLLOW on each.  fd or -errno (-ELOOP for a link). */
static int open_parts(int dirfd, const char *rel)
{
	char part[PATH_MAX];
	const char *s = rel;
	int cur = dirfd, fd;

	for (;;) {
		size_t len = strcspn(s, "/");

		if (len >= sizeof(part)) {
			fd = -ENAMETOOLONG;
			break;
		}
		memcpy(part, s, len);
		part[len] = '\0';
		s += len;
		if (!*s) {
			fd = openat(cur, part, OPEN_FLAGS | O_NOFOLLOW);
			fd = fd < 0 ? -errno : fd;
			break;
		}
		s++;
		fd = openat(cur, part, O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
		if (fd < 0) {
			/* A link where a folder should be reads ENOTDIR under O_NOFOLLOW|O_DIRECTORY. */
			struct stat st;

			fd = errno == ENOTDIR && fstatat(cur, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)
				     ? -ELOOP : -errno;
			break;
		}
		if (cur != dirfd)
			close(cur);
		cur = fd;
	}
	if (cur != dirfd)
		close(cur);
	return fd;
}

/* Is the file open on fd inside one of roots (n 0: anywhere)? */
static int fd_within(int fd, const char *const *roots, size_t n)
{
	char proc[64], real[PATH_MAX];
	ssize_t len;

	if (n == 0)
		return 1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	len = readlink(proc, real, sizeof(real) - 1);
	if (len <= 0)
		return 0;
	real[len] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t rl = strlen(roots[i]);

		while (rl > 1 && roots[i][rl - 1] == '/')
			rl--;
		if (strncmp(real, roots[i], rl) == 0 && (real[rl] == '/' || (rl == 1 && roots[i][0] == '/')))
			return 1;
	}
	return 0;
}

int fg_fs_open_beneath(int dirfd, const char *rel, const struct fg_fs_links *links, int *out)
{
	struct stat st;
	int fd, flags;

	if (!fg_fs_confined_relpath(rel))
		return -EINVAL;
	fd = open_resolved(dirfd, rel);
	if (fd == -ENOSYS)
		fd = open_parts(dirfd, rel);
	if (fd == -ELOOP || fd == -EXDEV) {
		if (!links || !links->follow)
			return FG_FS_SYMLINK;
		fd = openat(dirfd, rel, OPEN_FLAGS);
		if (fd < 0)
			return errno == ELOOP ? FG_FS_SYMLINK : -errno;
		if (!fd_within(fd, links->roots, links->n_roots)) {
			close(fd);
			return FG_FS_OUTSIDE;
		}
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return FG_FS_NOT_REGULAR;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags >= 0)
		fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	*out = fd;
	return 0;
}
