/*
 * fs.h: the file-system steps every writer in forged repeats, written once:
 * a whole buffer to a descriptor, an atomic file replacement, fsync of a
 * folder, mkdir -p, joining a path, removing a tree, and hard-link-else-copy.
 *
 * Two return shapes.  The primitives (write_all, fsync_dir, fsync_parent,
 * mkdir_p, rm_rf) return 0 or -errno, so the caller words the message about
 * its own subject ("writing tensor 'x': No space left on device").  The
 * steps that own a whole operation (join, link_or_copy, write_atomic) fill
 * struct fg_err with a message naming the path and return FG_EINPUT,
 * FG_EUSAGE (a path too long), FG_ENOMEM, or FG_ENOSPC when what they
 * write meets a full disk or quota (fg_fs_write_errcode).
 */
#ifndef FG_FS_H
#define FG_FS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "forge/core/error.h"

/* Bytes handed to one write(2): Linux moves at most 0x7ffff000 per call anyway. */
#define FG_FS_WRITE_CHUNK (1u << 30)

/*
 * Write all len bytes of data to fd, in calls of at most FG_FS_WRITE_CHUNK,
 * retrying short writes and EINTR.  Returns 0 or -errno (errno is left as the
 * failing write set it; a write that makes no progress is -EIO).
 */
int fg_fs_write_all(int fd, const void *data, size_t len);

/*
 * The code of a failure (errno value e) creating, writing, syncing or
 * renaming what forged writes (an artifact, its originals, a state file):
 * a full disk or an exhausted quota (ENOSPC, EDQUOT) is FG_ENOSPC, forged's
 * own trouble (exit 3, HTTP 507, the job's request not to blame); ENOMEM
 * is FG_ENOMEM; anything else (no permission, a read-only file system, a
 * folder gone) is FG_EINPUT: the output the caller named cannot be written
 * (exit 2).
 */
int fg_fs_write_errcode(int e);

/* fsync the folder path.  0 or -errno. */
int fg_fs_fsync_dir(const char *path);

/* fsync the folder holding path ("." for a bare name), after a rename into it.  0 or -errno. */
int fg_fs_fsync_parent(const char *path);

/*
 * Create the folder path and its missing parents with mode (mkdir -p).  An
 * existing folder is fine; an existing non-folder is -ENOTDIR.  0 or -errno
 * (-ENAMETOOLONG beyond PATH_MAX).
 */
int fg_fs_mkdir_p(const char *path, mode_t mode);

/* "dir/name" into buf (len bytes).  0, or FG_EUSAGE "path too long" when it does not fit. */
int fg_fs_join(char *buf, size_t len, const char *dir, const char *name, struct fg_err *err);

/*
 * Remove path and everything under it, never following a symbolic link.  A
 * missing path is 0; otherwise 0 or the -errno of the first entry that could
 * not be removed (the walk stops there).
 */
int fg_fs_rm_rf(const char *path);

/*
 * Make dst (which must not exist) hold src's bytes: a hard link when src and
 * dst share a file system, else a copy (copy_file_range, else a read/write
 * loop, for file systems and files it does not serve), fsynced, created
 * read-only; a link is made read-only too (the source name shares its inode
 * and loses its write bits).  A failed
 * copy removes its partial dst.  0 or FG_EINPUT/FG_ENOMEM/FG_ENOSPC.
 */
int fg_fs_link_or_copy(const char *src, const char *dst, struct fg_err *err);

/*
 * The same for the file open on fd (a regular file the caller opened and
 * checked; label names it): a hard link to that very inode when it shares
 * dst's file system, else a copy read from fd.  0 or FG_EINPUT/FG_ENOMEM/FG_ENOSPC.
 */
int fg_fs_link_or_copy_fd(int fd, const char *label, const char *dst, struct fg_err *err);

/*
 * A file replaced atomically, for a writer that writes it in pieces:
 * fg_fs_atomic_open creates a temporary file in path's folder (O_EXCL, so
 * concurrent writers never share one) and leaves its descriptor in a->fd;
 * the caller writes a->fd (messages may name a->tmp); fg_fs_atomic_commit
 * fsyncs it, closes it, renames it over path and fsyncs the folder, so a
 * reader or a crash sees the old file or the whole new one.
 * fg_fs_atomic_abort closes and removes a temporary file that was not
 * committed (after a failed commit too), and does nothing otherwise.
 * Failures: fg_fs_write_errcode's codes, FG_EUSAGE for a path too long.
 */
struct fg_fs_atomic {
	int fd;                /* -1 once closed */
	int created;           /* tmp exists and is ours to remove */
	const char *path;
	char tmp[PATH_MAX];
};

int fg_fs_atomic_open(struct fg_fs_atomic *a, const char *path, struct fg_err *err);
int fg_fs_atomic_commit(struct fg_fs_atomic *a, struct fg_err *err);
void fg_fs_atomic_abort(struct fg_fs_atomic *a);

/*
 * Replace path with len bytes of data atomically (fg_fs_atomic_open, one
 * write, fg_fs_atomic_commit).  The temporary file never outlives a failure.
 */
int fg_fs_write_atomic(const char *path, const void *data, size_t len, struct fg_err *err);

/*
 * Symbolic links beneath a checkpoint folder (docs/architecture.md,
 * "Opening files beneath a folder").  By default every link is refused;
 * with follow, a link is followed when the file it resolves to is a
 * regular file inside one of roots (canonical folders, as realpath gives
 * them; n_roots 0 with follow: any folder), which is what a Hugging Face
 * cache snapshot (links into ../../blobs/) needs.
 */
struct fg_fs_links {
	int follow;
	const char *const *roots;
	size_t n_roots;
};

/* What fg_fs_open_beneath returns besides 0 and -errno. */
#define FG_FS_SYMLINK     (-100001) /* a symbolic link, refused */
#define FG_FS_NOT_REGULAR (-100002) /* a FIFO, device, socket or folder */
#define FG_FS_OUTSIDE     (-100003) /* a followed link resolves outside the allowed roots */

/*
 * Open rel (a relative path without "..", checked here) beneath the folder
 * dirfd for reading: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS where the kernel has it, else one openat per part
 * with O_NOFOLLOW; always O_NONBLOCK (a FIFO cannot block the open; the flag
 * is cleared before returning) and O_NOCTTY.  Only a regular file is
 * returned.  links may be NULL (refuse every link).  0 with *fd set (the
 * caller closes it), or a negative code for fg_fs_open_why: -ENOENT,
 * FG_FS_SYMLINK, FG_FS_NOT_REGULAR, FG_FS_OUTSIDE, -EINVAL (a path that
 * leaves the folder) or another -errno.
 */
int fg_fs_open_beneath(int dirfd, const char *rel, const struct fg_fs_links *links, int *fd);

/* Words for a failure of fg_fs_open_beneath ("is a symbolic link (refused)", "No such file ..."). */
const char *fg_fs_open_why(int rc);

/*
 * A relative path that stays inside its folder: not empty, not absolute,
 * no empty part, no "." or ".." part.
 */
int fg_fs_confined_relpath(const char *p);

#endif
