//! The seed findings the lab does not judge, each with the reason, stated in the register
//! (docs/findings.md and the files it names) at the end of its family: a finding with no rule
//! is said to have none, and why, rather than left out.

use crate::model::spec::Family;

/// A seed finding no rule judges.
#[derive(Debug, Clone, Copy)]
pub struct Unjudged {
    pub family: Family,
    /// Where the seed says it.
    pub source: &'static str,
    /// What the seed claims, in our words, with its numbers.
    pub seed: &'static str,
    /// Why it is not judged on this machine: what the measurement would need that is not here.
    pub why: &'static str,
}

/// Every seed finding without a rule, by family.
pub const UNJUDGED: &[Unjudged] = &[
    Unjudged {
        family: Family::Paper,
        source: "Gammo et al. 2004, Table 1 (gprof), §5",
        seed: "Table 1's percentages themselves, each call's share of the μserver's run time at 22,000 requests/s (read 20-22%, close 13-15%, setsockopt 8-11%, accept 9-10%, write 4-6%, fcntl and sendfile 3-4% under every mechanism; select 13.33%, poll 13.32%, epoll_ctl 16.34% under epoll-LT), and the user-space time the text adds to it: about 2% of epoll-ET's run time tracking each socket's state, and the interest-set handling of select and poll that \"does not appear in the gprof data\".",
        why: "The percentages are a 2004 profile: gprof's shares of a 2.4 GHz Xeon's run time under a modified Linux 2.6.5 in uni-processor mode. evlab times each system call with a monotonic clock on today's kernel and CPU, where one call's cost against another's is not 2004's, so the lab judges the comparisons the paper draws from the table (the table1-* rules), not its numbers. The user-space costs would need a profile of the server's own functions, which evlab does not make: it counts and times system calls only.",
    },
    Unjudged {
        family: Family::Paper,
        source: "Gammo et al. 2004, Table 1, §5",
        seed: "epoll-ctlv spends about as much time in epoll_ctlv and epoll_ctl together (9.28% + 5.98%, \"around 16%\") as level-triggered epoll in epoll_ctl (16.34%), and 6.01% in epoll_wait.",
        why: "On this machine's kernel (Linux 6.18, which has IORING_OP_EPOLL_WAIT) evlab's epoll-ctlv submits its batch of changes and its wait in one io_uring_enter (the committed table1-syscalls run has no epoll_wait row for it), so the time of the one cannot be told from the other's. Its calls are judged (table1-epoll-ctlv-calls), and the whole of its time with events against select's (table1-epoll-events-above-select).",
    },
    Unjudged {
        family: Family::Proxy,
        source: "Rosu & Rosu 2003, §3 (the splice interface), §4.2",
        seed: "AutoRelease on its own: with it the kernel releases the splicing context when the transfer ends, and the application saves the Unsplice call; the source's Squid set it on every splice and measured no effect of it apart.",
        why: "AutoRelease is a flag of the source's kernel module, whose splice joined two sockets inside the kernel under a context the application had to release. Linux has no splice between two sockets and no such context: splice(2) moves the bytes through a pipe each time the application calls it, so there is no Unsplice call to save. evlab's splice-release approximates the mode (a pipe grown once to the body, the end found by counting, no look at the origin's socket after the body: docs/proxy-internals.md), and saves calls by that design, not by a release in the kernel; the source gives no measurement of AutoRelease apart to judge it against. Its calls per response are in docs/proxy.md.",
    },
    Unjudged {
        family: Family::Proxy,
        source: "Rosu & Rosu 2003, §5.2, Figs. 9 and 10",
        seed: "Near overload splice's gain shrinks in CPU and grows in response time: with non-cacheable 8 KB objects the gap in CPU utilization falls from 8% at 120 requests/s to 0.9% at 200, while the gap in mean response time grows from 2 ms to 14 ms.",
        why: "Both are read where the proxy's CPU nears saturation, which this machine cannot reach cleanly: the proxy has one of its two vCPUs, the load and the origin share the other, and at fig-proxy-rate's 5,000 requests/s the proxy uses about half its CPU and the client two thirds of its own (that experiment's design note), so the client and the origin saturate first. A CPU quota would bring the proxy to overload first, but then both arms use all of it, so the gap in utilization vanishes by construction (a rule on it could not fail), and the response times near overload are the quota's periods waited out (capacity-search, in findings-history.md), not the proxy's queue. Splice's gain below overload is judged at the lowest and the highest rate (proxy-rate-splice-lowest, proxy-rate-splice-highest).",
    },
    Unjudged {
        family: Family::Proxy,
        source: "Rosu & Rosu 2003, §5.3, Figs. 12 and 13",
        seed: "With Polymix-4 the mechanisms cut the mean response time of hits and of misses apart: for hits uselect by 4-35 ms, splice by 1-28 ms and both by 4-80 ms (10-30%); for misses uselect by 15-30 ms, splice by 6-16 ms and both about as much as uselect alone (0.5-1.3%); /dev/epoll's misses took 20-50 ms longer than select's.",
        why: "evlab's load keeps one response-time histogram per point, not the hits' and the misses' apart (fig-proxy-rt shows the mixed percentiles and says so), and a run of hits alone (fig-proxy-conns, where Fig. 6 is judged) has no misses for splice to relieve. And the source's times are its testbed's: its misses crossed an emulated WAN (80 ms round trips, 0.05% loss) to Polygraph servers that thought 2.5 s per object, so its milliseconds, and the shares they make, have no counterpart on loopback with a 20 ms origin.",
    },
    Unjudged {
        family: Family::Proxy,
        source: "Rosu & Rosu 2003, §5.1, Fig. 5",
        seed: "At these loads /dev/epoll scales better than select and poll, and select slightly better than poll.",
        why: "Not a rule of its own: the source gives it no number. How select's and /dev/epoll's load grow with the connections is judged on Fig. 4's numbers (proxy-conns-select-grows, proxy-conns-epoll-grows), and uselect against each of the three on Fig. 5's (the proxy-hits-uselect-* rules).",
    },
];
