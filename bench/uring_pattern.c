/*
 * The copy proxy's two I/O patterns, epoll-et against io_uring, in one process: what io_uring
 * itself costs a 1 MiB copied response, without the rest of evlab proxy.
 *
 * An "origin" thread writes a 1 MiB burst into a loopback TCP connection every GAP_US
 * microseconds; a "client" thread reads whatever comes on a second connection. Both run on
 * CPU 1. The forwarding thread, on CPU 0, moves each burst from the first connection to the
 * second in 64 KiB pieces, as `evlab proxy --forward copy` does with its default
 * --buffer-size, choosing for each burst at random (a fixed seed) one of:
 *
 *   epoll-et: non-blocking read(2) until EAGAIN, write(2) of each piece, epoll_wait(2)
 *             (edge-triggered) when either would block;
 *   uring:    the proxy's `uring` engine's pattern: one ring (SINGLE_ISSUER, DEFER_TASKRUN),
 *             IORING_OP_RECV into one of two buffers; each completion's piece sent with
 *             IORING_OP_SEND (MSG_WAITALL) in the same ring enter as the next recv into
 *             the other buffer; a recv after a short one waits first
 *             (IORING_RECVSEND_POLL_FIRST).
 *
 * The forwarding thread's CPU time (CLOCK_THREAD_CPUTIME_ID) is summed per pattern from the
 * end of one burst to the end of the next (the wait for the burst included). Both patterns
 * run in the same process against the same peers, interleaved burst by burst, so the drift of
 * a noisy machine falls on both; run it several times and look at the ratio's spread.
 * With TIMEOUT set to 1, every wait carries a 1 s timeout (evlab proxy's waits carry one).
 * With BIG_RING set to 1, the ring is evlab proxy's (4,096 entries, 32,768 completions,
 * SUBMIT_ALL) instead of 256 entries.
 * With ORIGIN_PORT, the origin is an HTTP server on that loopback port (`evlab serve`, whose
 * --root holds a 1 MiB file named o1048576), and the request leg is forwarded too: the client
 * thread sends a request for each burst; the forwarding thread reads it (a wait and a small
 * read or recv) and asks the origin (a small write, or a send in the same ring enter as the
 * response's first recv); each burst is then the response, its head and 1 MiB body.
 * With CONN_CALLS (and ORIGIN_PORT), the client opens a new connection every CONN_CALLS bursts,
 * as `evlab load --num-calls` does: the forwarding thread closes the old one and accepts the
 * new one (accept4(2) under epoll, IORING_OP_ACCEPT under io_uring), in whichever pattern's
 * burst finds the old one closed.
 *
 * The proxy form, `uring_pattern proxy MODE LISTEN_PORT ORIGIN_PORT SIZE`, is one pattern (MODE
 * epoll-et or uring) as an HTTP proxy for an outside client such as `evlab load`: it listens on
 * 127.0.0.1:LISTEN_PORT (0: a free port; the port is printed on stderr), forwards each request
 * to the origin (`evlab serve` on ORIGIN_PORT, whose --root holds a file oSIZE) as a fixed GET of
 * /oSIZE, and each response (head and SIZE bytes) back, with evlab proxy's ring and a 1 s
 * timeout on every wait. One client connection at a time: the next is accepted when the client
 * closes (a client that goes away mid-response is dropped, the response drained). It runs until
 * SIGTERM or SIGINT, then prints its CPU per response on stderr. `bench/proxy_bench.py
 * --pattern` measures it beside evlab proxy, through the same load and the same accounting.
 *
 * Build and run (liburing-dev: scripts/setup.sh installs it):
 *   cc -O2 -o /tmp/uring_pattern bench/uring_pattern.c -luring -lpthread
 *   /tmp/uring_pattern 1000 4000 0      # BURSTS GAP_US TIMEOUT
 *   taskset -c 1 evlab serve --listen 127.0.0.1:18090 --root DIR --header-timeout 0 &
 *   /tmp/uring_pattern 1000 4000 1 1 18090 10    # ... TIMEOUT BIG_RING ORIGIN_PORT CONN_CALLS
 *   /tmp/uring_pattern proxy uring 0 18090 1048576   # MODE LISTEN_PORT ORIGIN_PORT SIZE
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The object forwarded: 1 MiB, or the proxy form's SIZE. */
static long BURST = 1 << 20;
#define PIECE 65536

static int bursts, gap_us, use_timeout;
/* With an HTTP origin: the client's request leg is forwarded too, and each burst is a response
 * (its head and a 1 MiB body). */
static int leg;
/* With CONN_CALLS > 0, the client opens a new connection every CONN_CALLS bursts. */
static int conn_calls, listen_client, client_in_epoll;
static long total = 1 << 20;
static char reqbuf[4096];
static const char REQ[] =
    "GET /o1048576 HTTP/1.1\r\nHost: proxy\r\nUser-Agent: pattern\r\nAccept: */*\r\n\r\n";
static char GET[128] = "GET /o1048576 HTTP/1.1\r\nHost: origin\r\n\r\n";
/* The proxy form: an outside client, which may go away at any time (the rest of its
 * response is then drained from the origin and dropped). */
static int proxy_form, client_dead;
static int ports[2];
static int from_origin, to_client, ep;
static char *buf[2];
static struct io_uring ring;
static long waits[2], calls[2];

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s))
        die("sched_setaffinity");
}

static int listener(int i, int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    /* TCP_NODELAY, as evlab proxy sets it (accepted sockets inherit it): without it a
     * response's short last piece waits for the client's delayed ACK. */
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        setsockopt(l, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) || bind(l, (void *)&sa, sizeof sa) || listen(l, 128) ||
        getsockname(l, (void *)&sa, &len))
        die("listener");
    ports[i] = ntohs(sa.sin_port);
    return l;
}

static int dial(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0 || setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        connect(s, (void *)&sa, sizeof sa))
        die("connect");
    return s;
}

static void *origin(void *unused) {
    (void)unused;
    pin(1);
    int s = dial(ports[0]);
    char *b = malloc(PIECE);
    memset(b, 'x', PIECE);
    for (int k = 0; k < bursts; k++) {
        usleep(gap_us);
        for (long left = BURST; left > 0;) {
            long n = write(s, b, left < PIECE ? left : PIECE);
            if (n <= 0)
                die("origin write");
            left -= n;
        }
    }
    close(s);
    return NULL;
}

static void *client(void *unused) {
    (void)unused;
    pin(1);
    int s = dial(ports[1]);
    char *b = malloc(PIECE);
    /* With an HTTP origin the client asks for each burst, and reads it whole. */
    for (int k = 0; leg && k < bursts; k++) {
        usleep(gap_us);
        if (conn_calls && k > 0 && k % conn_calls == 0) {
            close(s);
            s = dial(ports[1]);
        }
        if (write(s, REQ, sizeof REQ - 1) != (long)(sizeof REQ - 1))
            die("client write");
        for (long got = 0; got < total;) {
            long n = read(s, b, PIECE);
            if (n <= 0)
                die("client read");
            got += n;
        }
    }
    while (read(s, b, PIECE) > 0)
        ;
    close(s);
    return NULL;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void epoll_block(void) {
    struct epoll_event ev[8];
    waits[0]++;
    if (epoll_wait(ep, ev, 8, use_timeout ? 1000 : -1) < 0 && errno != EINTR)
        die("epoll_wait");
}

/* The client's connection, registered with the epoll set if it is not yet. */
static void epoll_client(void) {
    if (client_in_epoll)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = to_client};
    calls[0]++;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, to_client, &ev))
        die("epoll_ctl");
    client_in_epoll = 1;
}

/* The client closed its connection (it opens one every CONN_CALLS bursts): take the next. */
static void epoll_next_client(void) {
    calls[0] += 2;
    close(to_client);
    client_in_epoll = 0;
    for (;;) {
        to_client = accept4(listen_client, NULL, NULL, SOCK_NONBLOCK);
        if (to_client >= 0)
            break;
        if (errno != EAGAIN)
            die("accept4");
        epoll_block();
        calls[0]++;
    }
    epoll_client();
}

static void burst_epoll(void) {
    if (client_dead) {
        client_dead = 0;
        epoll_next_client();
    }
    while (leg) {
        epoll_client();
        calls[0]++;
        long n = read(to_client, reqbuf, sizeof reqbuf);
        if (n < 0 && errno == EAGAIN) {
            epoll_block();
            continue;
        }
        if ((n == 0 && conn_calls) || (n < 0 && proxy_form)) {
            epoll_next_client();
            continue;
        }
        if (n <= 0)
            die("request read");
        calls[0]++;
        if (write(from_origin, GET, strlen(GET)) != (long)strlen(GET))
            die("origin write");
        break;
    }
    for (long moved = 0; moved < total;) {
        long want = total - moved < PIECE ? total - moved : PIECE;
        calls[0]++;
        long n = read(from_origin, buf[0], want);
        if (n < 0 && errno == EAGAIN) {
            epoll_block();
            continue;
        }
        if (n <= 0)
            die("read");
        for (long w = 0; w < n && !client_dead;) {
            calls[0]++;
            long k = write(to_client, buf[0] + w, n - w);
            if (k < 0 && errno == EAGAIN) {
                epoll_block();
                continue;
            }
            if (k < 0 && proxy_form) {
                client_dead = 1;
                break;
            }
            if (k <= 0)
                die("write");
            w += k;
        }
        moved += n;
    }
}

static int last_recv_full;

static void queue_recv(int b, long len) {
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    io_uring_prep_recv(s, from_origin, buf[b], len, 0);
    if (!last_recv_full)
        s->ioprio |= IORING_RECVSEND_POLL_FIRST;
    s->user_data = 10 + b;
}

static void ring_enter(void) {
    struct io_uring_cqe *cqe;
    int r;
    calls[1]++;
    waits[1]++;
    if (use_timeout) {
        struct __kernel_timespec ts = {.tv_sec = 1};
        r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
    } else {
        r = io_uring_submit_and_wait(&ring, 1);
    }
    if (r < 0 && r != -ETIME && r != -EINTR) {
        errno = -r;
        die("io_uring_enter");
    }
}

static void burst_uring(void) {
    long moved = 0, len = PIECE;
    int sending = 0;
    if (leg) {
        struct io_uring_sqe *s = io_uring_get_sqe(&ring);
        if (client_dead) {
            /* The last client went away mid-response: take the next. */
            client_dead = 0;
            calls[1]++;
            close(to_client);
            client_in_epoll = 0;
            io_uring_prep_accept(s, listen_client, NULL, NULL, SOCK_NONBLOCK);
            s->user_data = 31;
        } else {
            io_uring_prep_recv(s, to_client, reqbuf, sizeof reqbuf, 0);
            s->ioprio |= IORING_RECVSEND_POLL_FIRST;
            s->user_data = 30;
        }
        for (int done = 0; !done;) {
            ring_enter();
            struct io_uring_cqe *cqe;
            unsigned head, seen = 0;
            int next = 0;
            io_uring_for_each_cqe(&ring, head, cqe) {
                seen++;
                if (cqe->user_data == 30 &&
                    ((cqe->res == 0 && conn_calls) || (cqe->res < 0 && proxy_form))) {
                    /* The client closed: close, then accept its next connection. */
                    calls[1]++;
                    close(to_client);
                    client_in_epoll = 0;
                    next = 1;
                } else if (cqe->user_data == 30) {
                    if (cqe->res < 0)
                        die("request recv");
                    done = 1;
                } else if (cqe->user_data == 31) {
                    if (cqe->res < 0) {
                        errno = -cqe->res;
                        die("accept");
                    }
                    to_client = cqe->res;
                    next = 2;
                }
            }
            io_uring_cq_advance(&ring, seen);
            if (next == 1) {
                s = io_uring_get_sqe(&ring);
                io_uring_prep_accept(s, listen_client, NULL, NULL, SOCK_NONBLOCK);
                s->user_data = 31;
            } else if (next == 2) {
                s = io_uring_get_sqe(&ring);
                io_uring_prep_recv(s, to_client, reqbuf, sizeof reqbuf, 0);
                s->ioprio |= IORING_RECVSEND_POLL_FIRST;
                s->user_data = 30;
            }
        }
        /* The request to the origin goes in the same enter as the response's first recv. */
        s = io_uring_get_sqe(&ring);
        io_uring_prep_send(s, from_origin, GET, strlen(GET), 0);
        s->user_data = 2;
    }
    queue_recv(0, len);
    /* A piece received waits here if the last send is still in flight (its buffer is the one
     * the next recv would use): it is sent, and the next recv queued, when that send is done. */
    int got = 0, which = 0, have = 0;
    while (moved < total || sending || have) {
        ring_enter();
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            if (cqe->user_data == 2) {
                if (cqe->res != (int)strlen(GET))
                    die("origin send");
            } else if (cqe->user_data >= 10) {
                got = cqe->res;
                have = 1;
                which = (int)cqe->user_data - 10;
                if (got < 0) {
                    errno = -got;
                    die("recv");
                }
                if (got == 0) {
                    fprintf(stderr, "origin closed early\n");
                    exit(1);
                }
                last_recv_full = got >= len;
                moved += got;
            } else {
                sending = 0;
                if (cqe->res < 0 && proxy_form) {
                    client_dead = 1;
                } else if (cqe->res < 0) {
                    errno = -cqe->res;
                    die("send");
                }
            }
        }
        io_uring_cq_advance(&ring, seen);
        if (!have || sending)
            continue;
        have = 0;
        if (!client_dead) {
            struct io_uring_sqe *s = io_uring_get_sqe(&ring);
            io_uring_prep_send(s, to_client, buf[which], got, MSG_WAITALL);
            s->user_data = 1;
            sending = 1;
        }
        if (moved < total) {
            len = total - moved < PIECE ? total - moved : PIECE;
            queue_recv(which ^ 1, len);
        }
    }
}

/* evlab proxy's ring (4,096 entries, 32,768 completions, SUBMIT_ALL) if `big`, else 256 entries. */
static void ring_init(int big) {
    struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
    if (big) {
        p.flags |= IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
        p.cq_entries = 32768;
    }
    int e = io_uring_queue_init_params(big ? 4096 : 256, &ring, &p);
    if (e) {
        errno = -e;
        die("io_uring_queue_init_params");
    }
}

/* Dials the HTTP origin and asks it for the object once, to learn the length of its response's
 * head (the same in every response); 0 if the object is not a 200 of BURST bytes. */
static int origin_first(int http_port) {
    leg = 1;
    from_origin = dial(http_port);
    if (write(from_origin, GET, strlen(GET)) != (long)strlen(GET))
        die("origin write");
    char *b = malloc(BURST + 4096), want[64];
    snprintf(want, sizeof want, "Length: %ld\r\n", BURST);
    long got = 0, head = 0;
    while (!head || got < head + BURST) {
        long n = read(from_origin, b + got, BURST + 4096 - got);
        if (n <= 0)
            die("first response");
        got += n;
        char *end = head ? NULL : memmem(b, got, "\r\n\r\n", 4);
        if (end) {
            head = end - b + 4;
            if (!memmem(b, head, " 200 ", 5) || !memmem(b, head, want, strlen(want))) {
                fprintf(stderr, "the origin's /o%ld is not a 200 of %ld bytes\n", BURST, BURST);
                return 0;
            }
        }
    }
    total = head + BURST;
    free(b);
    return 1;
}

/* The forwarding side's descriptors, non-blocking, in the epoll set; the two buffers. */
static void forwarding_setup(int l1) {
    fcntl(from_origin, F_SETFL, O_NONBLOCK);
    fcntl(to_client, F_SETFL, O_NONBLOCK);
    fcntl(l1, F_SETFL, O_NONBLOCK);
    listen_client = l1;
    ep = epoll_create1(0);
    struct epoll_event in = {.events = EPOLLIN | EPOLLET, .data.fd = from_origin};
    struct epoll_event lin = {.events = EPOLLIN | EPOLLET, .data.fd = l1};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, from_origin, &in) ||
        epoll_ctl(ep, EPOLL_CTL_ADD, l1, &lin))
        die("epoll");
    epoll_client();
    calls[0] = 0;
    for (int i = 0; i < 2; i++) {
        buf[i] = malloc(PIECE);
        memset(buf[i], 0, PIECE);
    }
}

static const char *name[2] = {"epoll-et", "uring"};
static double cpu[2];
static int done[2], form_mode;

/* One burst by pattern m (0 epoll-et, 1 uring), its CPU time added to that pattern's. In the
 * proxy form a report may interrupt the addition (a double's store is not atomic against a
 * signal handler): near enough for a report. */
static void one_burst(int m) {
    double t0 = cpu_now();
    if (m)
        burst_uring();
    else
        burst_epoll();
    cpu[m] += cpu_now() - t0;
    done[m]++;
}

static void report_proxy(int sig) {
    (void)sig;
    char line[256];
    int m = form_mode, n = snprintf(line, sizeof line,
                                    "%s: %.1f us of CPU per response (%d responses), %.1f waits and %.1f calls per response\n",
                                    name[m], done[m] ? cpu[m] * 1e6 / done[m] : 0.0, done[m],
                                    done[m] ? (double)waits[m] / done[m] : 0.0,
                                    done[m] ? (double)calls[m] / done[m] : 0.0);
    if (write(2, line, n) < 0)
        _exit(1);
    _exit(0);
}

/* The proxy form: one pattern as an HTTP proxy for an outside client (see the top). */
static int proxy_main(int argc, char **argv) {
    long port = argc == 6 ? strtol(argv[3], NULL, 10) : -1;
    long origin_port = argc == 6 ? strtol(argv[4], NULL, 10) : -1;
    BURST = argc == 6 ? strtol(argv[5], NULL, 10) : 0;
    form_mode = argc == 6 && !strcmp(argv[2], "uring") ? 1 : 0;
    if (argc != 6 || (strcmp(argv[2], "uring") && strcmp(argv[2], "epoll-et")) || port < 0 ||
        port > 65535 || origin_port < 1 || origin_port > 65535 || BURST < 1 || BURST > (1L << 30)) {
        fprintf(stderr, "usage: %s proxy epoll-et|uring LISTEN_PORT ORIGIN_PORT SIZE\n", argv[0]);
        return 2;
    }
    snprintf(GET, sizeof GET, "GET /o%ld HTTP/1.1\r\nHost: origin\r\n\r\n", BURST);
    proxy_form = 1;
    conn_calls = 1;
    use_timeout = 1;
    signal(SIGPIPE, SIG_IGN);
    ring_init(1);
    int l1 = listener(1, (int)port);
    if (!origin_first((int)origin_port))
        return 1;
    signal(SIGTERM, report_proxy);
    signal(SIGINT, report_proxy);
    fprintf(stderr, "listening on 127.0.0.1:%d\n", ports[1]);
    to_client = accept(l1, NULL, NULL);
    if (to_client < 0)
        die("accept");
    forwarding_setup(l1);
    for (;;)
        one_burst(form_mode);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "proxy"))
        return proxy_main(argc, argv);
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s BURSTS GAP_US [TIMEOUT 0|1 [BIG_RING 0|1 [ORIGIN_PORT [CONN_CALLS]]]]\n"
                "       %s proxy epoll-et|uring LISTEN_PORT ORIGIN_PORT SIZE\n",
                argv[0], argv[0]);
        return 2;
    }
    bursts = atoi(argv[1]);
    gap_us = atoi(argv[2]);
    use_timeout = argc > 3 && atoi(argv[3]) != 0;
    if (bursts < 2 || gap_us < 0) {
        fprintf(stderr, "BURSTS must be at least 2 and GAP_US not negative\n");
        return 2;
    }
    pin(0);
    int big = argc > 4 && atoi(argv[4]) != 0;
    int http_port = argc > 5 ? atoi(argv[5]) : 0;
    conn_calls = argc > 6 ? atoi(argv[6]) : 0;
    if (conn_calls < 0 || (conn_calls && !http_port)) {
        fprintf(stderr, "CONN_CALLS must be positive, and goes with ORIGIN_PORT\n");
        return 2;
    }
    ring_init(big);
    int l0 = listener(0, 0), l1 = listener(1, 0);
    pthread_t to, tc;
    if (http_port) {
        if (!origin_first(http_port))
            return 1;
    } else {
        pthread_create(&to, NULL, origin, NULL);
    }
    pthread_create(&tc, NULL, client, NULL);
    if (!http_port)
        from_origin = accept(l0, NULL, NULL);
    to_client = accept(l1, NULL, NULL);
    if (from_origin < 0 || to_client < 0)
        die("accept");
    forwarding_setup(l1);
    unsigned seed = 777;
    for (int k = 0; k < bursts; k++) {
        seed = seed * 1103515245 + 12345;
        one_burst((seed >> 16) & 1);
    }
    close(to_client);
    if (!http_port)
        pthread_join(to, NULL);
    pthread_join(tc, NULL);
    for (int m = 0; m < 2; m++)
        printf("%-9s %7.1f us of CPU per 1 MiB burst (%d bursts), %.1f waits and %.1f calls per burst\n",
               name[m], cpu[m] * 1e6 / done[m], done[m], (double)waits[m] / done[m],
               (double)calls[m] / done[m]);
    printf("uring / epoll-et: %.3f\n", (cpu[1] / done[1]) / (cpu[0] / done[0]));
    return 0;
}
