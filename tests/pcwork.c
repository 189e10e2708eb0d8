/* The workloads of tests/test_tools_023_kernel.py that need a C library call a tracer sees in each
 * root's own copy of the library (pthread_create, libssl): built in the test, run in the guest's root
 * for pycore and chrooted into Debian 13's root for bpftrace 0.23.2 (built against Debian 12's
 * glibc and OpenSSL 3, it runs on Debian 13's newer ones). ``pcwork MODE COMM``: COMM names it. */
#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *worker(void *arg) { return arg; }

int main(int argc, char **argv)
{
    if (argc > 2)
        prctl(PR_SET_NAME, argv[2], 0, 0, 0);
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0)
            return 1;
        return pthread_join(t, NULL) != 0;
    }
    if (argc > 1 && strcmp(argv[1], "ssl") == 0) {
        /* a client handshake on a socket pair nobody answers: SSL_do_handshake, SSL_write and
         * SSL_read each return -1 (SSL_ERROR_WANT_READ) at once on the non-blocking socket */
        int sv[2];
        char buf[16];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            return 1;
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        SSL *ssl = ctx ? SSL_new(ctx) : NULL;
        if (!ssl)
            return 1;
        SSL_set_fd(ssl, sv[0]);
        SSL_set_connect_state(ssl);
        SSL_do_handshake(ssl);
        SSL_write(ssl, "pcwork", 6);
        SSL_read(ssl, buf, sizeof buf);
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        return 0;
    }
    fprintf(stderr, "usage: pcwork thread|ssl [COMM]\n");
    return 2;
}
