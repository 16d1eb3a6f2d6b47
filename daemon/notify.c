/*
 * notify.c: sd_notify datagrams (notify.h).
 */
#include "daemon/notify.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int fg_notify(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un addr;
	socklen_t len;
	size_t n;
	int fd, rc;

	if (!path || !*path)
		return 1;
	n = strlen(path);
	if (n >= sizeof(addr.sun_path) || (path[0] != '/' && path[0] != '@'))
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	memcpy(addr.sun_path, path, n);
	if (path[0] == '@')
		addr.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/' ? 1 : 0));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	rc = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&addr, len) < 0 ? -1 : 0;
	close(fd);
	return rc;
}

unsigned long long fg_notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec)
		return 0;
	if (pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	v = strtoull(usec, &end, 10);
	return *end ? 0 : v;
}
