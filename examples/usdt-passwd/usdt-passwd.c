/*
 * usdt-passwd - a demo target with USDT probes, in the spirit of the USDT lab.
 *
 *   usdt-passwd [ROUNDS [INTERVAL_MS]]
 *
 * Each round walks the password database and fires, per entry:
 *   passwd:passwdfound(username, homedir)   two char * arguments; two
 *                                           locations (users / system accounts)
 *   passwd:lookup(uid, gid, round)          guarded by a semaphore: its
 *                                           arguments are computed only while
 *                                           a tracer is attached
 * ROUNDS 0 (default) runs until killed.
 */
#define _GNU_SOURCE
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

/* lookup.c: built with semaphores (sdt.h applies them to every probe of a file) */
extern unsigned short passwd_lookup_semaphore;
void fire_lookup(long uid, int gid, long round);

static volatile long users, system_accounts;

static void walk(long round)
{
	struct passwd *pw;

	setpwent();
	while ((pw = getpwent()) != NULL) {
		if (passwd_lookup_semaphore)  /* is-enabled: only while traced */
			fire_lookup((long)pw->pw_uid, (int)pw->pw_gid, round);
		if (pw->pw_uid >= 1000 && pw->pw_uid != 65534) {
			users++;
			DTRACE_PROBE2(passwd, passwdfound, pw->pw_name, pw->pw_dir);
		} else {
			system_accounts++;
			DTRACE_PROBE2(passwd, passwdfound, pw->pw_name, pw->pw_dir);
		}
	}
	endpwent();
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 0;
	long interval_ms = argc > 2 ? atol(argv[2]) : 1000;
	struct timespec ts = { interval_ms / 1000, (interval_ms % 1000) * 1000000L };

	for (long r = 0; rounds == 0 || r < rounds; r++) {
		walk(r);
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}
