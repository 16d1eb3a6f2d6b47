/*
 * evict.c: drop files' pages from the page cache, without root, for the
 * cold-cache benchmark runs (bench/forge/run.sh).
 *
 *   evict FILE...     prints "evict: N files, X MiB, R MiB resident before, A MiB after"
 *
 * For each file: fdatasync (dirty pages are not dropped, so write back any
 * first), posix_fadvise(POSIX_FADV_DONTNEED) over the whole file, and
 * mincore() of a read-only mapping before and after, so the run says how much
 * was cached and how much stayed (pages another process has mapped or
 * locked stay).  Exit 1 if a file cannot be opened or advised.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 bench/evict.c -o build/bench/evict
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Pages of fd's first size bytes that are in the page cache, or -1. */
static long long resident(int fd, off_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (size_t)((size + page - 1) / page), i;
	unsigned char *vec;
	long long count = 0;
	void *map;

	if (size == 0)
		return 0;
	map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -1;
	vec = malloc(n);
	if (!vec || mincore(map, (size_t)size, vec) != 0) {
		free(vec);
		munmap(map, (size_t)size);
		return -1;
	}
	for (i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)size);
	return count;
}

int main(int argc, char **argv)
{
	long page = sysconf(_SC_PAGESIZE);
	long long before = 0, after = 0, total = 0;
	int files = 0, rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: evict FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC), e;
		long long b, a;

		if (fd < 0 || fstat(fd, &st) != 0) {
			fprintf(stderr, "evict: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			close(fd);
			continue;
		}
		b = resident(fd, st.st_size);
		fdatasync(fd); /* a read-only fd may still sync; failure is harmless here */
		e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (e != 0) {
			fprintf(stderr, "evict: %s: posix_fadvise: %s\n", argv[i], strerror(e));
			rc = 1;
		}
		a = resident(fd, st.st_size);
		close(fd);
		files++;
		total += st.st_size;
		before += b > 0 ? b : 0;
		after += a > 0 ? a : 0;
	}
	printf("evict: %d files, %.1f MiB, %.1f MiB resident before, %.1f MiB after\n", files,
	       (double)total / 1048576.0, (double)(before * page) / 1048576.0, (double)(after * page) / 1048576.0);
	return rc;
}
