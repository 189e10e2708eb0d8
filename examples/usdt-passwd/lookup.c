/* The semaphore-guarded probe of usdt-passwd (see usdt-passwd.c). */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short passwd_lookup_semaphore __attribute__((section(".probes")));

__attribute__((noinline)) void fire_lookup(long uid, int gid, long round)
{
	STAP_PROBE3(passwd, lookup, uid, gid, round);
}
