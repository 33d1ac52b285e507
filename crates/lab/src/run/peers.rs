//! Peer servers (nginx, lighttpd) run under the same load as evlab, configured as
//! `bench/serve_bench.py` does: one worker, no access log, files cached, sendfile, long
//! keep-alive and read timeouts (idle connections must stay), a 4,096-connection backlog.
//! Proxy peers (nginx `proxy_pass`, HAProxy) the same way, in front of the run's origin.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::run::procs::command_line_output;
use evlab_reason::model::spec::ServerKind;

/// A peer's config (its file and text) and the argv that starts the peer reading it.
pub struct PeerConf {
    pub file: PathBuf,
    pub text: String,
    pub argv: Vec<String>,
}

impl PeerConf {
    /// Writes the config here and returns the argv.
    pub fn write(self) -> std::io::Result<Vec<String>> {
        std::fs::write(&self.file, &self.text)?;
        Ok(self.argv)
    }
}

/// The address a peer on this machine listens on: loopback, `port`.
fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// lighttpd's event handlers compiled into the installed binary, by their config names
/// (`lighttpd -V` lists `+ epoll (Linux)` for what the config calls `linux-sysepoll`).
pub fn lighttpd_handlers() -> Vec<String> {
    command_line_output(&["lighttpd", "-V"])
        .map(|out| parse_lighttpd_handlers(&out))
        .unwrap_or_default()
}

pub fn parse_lighttpd_handlers(v_output: &str) -> Vec<String> {
    let mut in_handlers = false;
    let mut out = Vec::new();
    for line in v_output.lines() {
        let t = line.trim();
        if t.starts_with("Event Handlers") {
            in_handlers = true;
            continue;
        }
        if in_handlers && t.ends_with(':') {
            break;
        }
        if !in_handlers {
            continue;
        }
        if let Some(rest) = t.strip_prefix("+ ") {
            let name = rest.split_whitespace().next().unwrap_or("");
            let cfg = match name {
                "select" => "select",
                "poll" => "poll",
                "epoll" => "linux-sysepoll",
                "kqueue" => "freebsd-kqueue",
                "/dev/poll" => "solaris-devpoll",
                _ => continue,
            };
            out.push(cfg.to_string());
        }
    }
    out
}

pub fn installed(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
        || ["/usr/sbin", "/usr/local/sbin", "/sbin"]
            .iter()
            .any(|d| Path::new(d).join(prog).is_file())
}

pub fn program(prog: &str) -> String {
    for d in ["/usr/sbin", "/usr/local/sbin", "/sbin"] {
        let p = Path::new(d).join(prog);
        if p.is_file() {
            return p.display().to_string();
        }
    }
    prog.to_string()
}

/// Writes nginx's config under `tmp` and returns its argv.
pub fn nginx_argv(tmp: &Path, docroot: &Path, port: u16) -> std::io::Result<Vec<String>> {
    nginx_conf(tmp, docroot, loopback(port), &program("nginx"), None).write()
}

/// nginx serving `docroot` on `listen`, its files under `tmp`, started as `nginx` (a path);
/// its worker as `user` if given (started as root, nginx's worker is otherwise `nobody`, who
/// may not read a document root under a private directory).
pub fn nginx_conf(
    tmp: &Path,
    docroot: &Path,
    listen: SocketAddr,
    nginx: &str,
    user: Option<&str>,
) -> PeerConf {
    let t = tmp.display();
    let conf = tmp.join("nginx.conf");
    let user = user.map(|u| format!("user {u};\n")).unwrap_or_default();
    PeerConf {
        text: format!(
            "{user}worker_processes 1;\nworker_rlimit_nofile 40000;\ndaemon off;\npid {t}/nginx.pid;\n\
error_log {t}/nginx-error.log error;\nevents {{ worker_connections 30000; use epoll; }}\n\
http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  keepalive_requests 100000000;\n\
  keepalive_timeout 600s;\n  client_header_timeout 600s;\n  open_file_cache max=1000 inactive=600s;\n\
  open_file_cache_valid 600s;\n  client_body_temp_path {t}/nb; proxy_temp_path {t}/np;\n\
  fastcgi_temp_path {t}/nf; uwsgi_temp_path {t}/nu; scgi_temp_path {t}/ns;\n\
  default_type application/octet-stream;\n\
  server {{ listen {listen} backlog=4096; root {root}; }}\n}}\n",
            root = docroot.display()
        ),
        argv: nginx_run(nginx, tmp, &conf),
        file: conf,
    }
}

/// nginx's argv: its prefix `tmp` and its config `conf`.
fn nginx_run(nginx: &str, tmp: &Path, conf: &Path) -> Vec<String> {
    vec![
        nginx.to_string(),
        "-p".into(),
        tmp.display().to_string(),
        "-c".into(),
        conf.display().to_string(),
    ]
}

/// Writes nginx's config as a reverse proxy (`proxy_pass` to `origin` with kept upstream
/// connections, no cache: the peer of `evlab proxy`) and returns its argv.
pub fn nginx_proxy_argv(tmp: &Path, origin: SocketAddr, port: u16) -> std::io::Result<Vec<String>> {
    nginx_proxy_conf(tmp, origin, loopback(port), &program("nginx")).write()
}

/// nginx as a reverse proxy in front of `origin`, on `listen`.
pub fn nginx_proxy_conf(
    tmp: &Path,
    origin: SocketAddr,
    listen: SocketAddr,
    nginx: &str,
) -> PeerConf {
    let t = tmp.display();
    let conf = tmp.join("nginx-proxy.conf");
    PeerConf {
        text: format!(
            "worker_processes 1;\nworker_rlimit_nofile 40000;\ndaemon off;\npid {t}/nginx.pid;\n\
error_log {t}/nginx-error.log error;\nevents {{ worker_connections 30000; use epoll; }}\n\
http {{\n  access_log off;\n  keepalive_requests 100000000;\n  keepalive_timeout 600s;\n\
  client_body_temp_path {t}/nb; proxy_temp_path {t}/np;\n\
  fastcgi_temp_path {t}/nf; uwsgi_temp_path {t}/nu; scgi_temp_path {t}/ns;\n\
  upstream origin {{ server {origin}; keepalive 64; }}\n\
  server {{\n    listen {listen} backlog=4096;\n    location / {{\n\
      proxy_pass http://origin;\n      proxy_http_version 1.1;\n\
      proxy_set_header Connection \"\";\n      proxy_max_temp_file_size 0;\n    }}\n  }}\n}}\n"
        ),
        argv: nginx_run(nginx, tmp, &conf),
        file: conf,
    }
}

/// The most connections HAProxy is given (its `maxconn`, global and per frontend): 10,000 idle
/// connections plus the load fit.
pub const HAPROXY_MAXCONN: usize = 20_000;
/// Pipes HAProxy may keep for splicing (`maxpipes`; its default is a quarter of `maxconn`).
pub const HAPROXY_MAXPIPES: usize = 2_048;

/// HAProxy's `maxconn` when started by the runner: [`HAPROXY_MAXCONN`], or less where the
/// children's descriptor limit is lower: what it holds beside the pipes' descriptors. An idle
/// connection holds one descriptor and a proxied request two; HAProxy counts two for each of
/// `maxconn` and, by default (`strict-limits`, 2.6), refuses to start when it cannot raise its
/// limit that far, so the config says `no strict-limits`: on a machine whose limit is 20,000,
/// 10,000 idle connections and the load still fit.
pub fn haproxy_maxconn() -> usize {
    haproxy_maxconn_in(children_nofile().unwrap_or(usize::MAX))
}

/// HAProxy's `maxconn` where its descriptor limit is `hard`.
pub fn haproxy_maxconn_in(hard: usize) -> usize {
    hard.saturating_sub(2 * HAPROXY_MAXPIPES + 256)
        .min(HAPROXY_MAXCONN)
}

/// The descriptor limit the runner's children get here (a higher one where the runner may
/// raise it: see procs.rs).
pub fn children_nofile() -> Option<usize> {
    let (_, hard) = evlab_sys::nofile_limit().ok()?;
    Some((hard as usize).max(crate::run::procs::child_nofile_if_raisable()))
}

/// Why a peer of `kind` (a proxy peer when `proxy`) cannot hold `idle` idle connections plus
/// the load where its descriptor limit is `hard` (`where_`: "here", "on the server host"):
/// past their caps peers answer nobody, which would be recorded as a server that serves
/// nothing. None: it can.
pub fn cannot_hold(
    kind: ServerKind,
    proxy: bool,
    idle: usize,
    hard: usize,
    where_: &str,
) -> Option<String> {
    let (cap, what) = match (kind, proxy) {
        (ServerKind::Haproxy, true) => (
            haproxy_maxconn_in(hard),
            "haproxy may hold at most {cap} connections {where} (its maxconn within the descriptor limit)",
        ),
        (ServerKind::Lighttpd, false) => (
            hard / 2,
            "lighttpd accepts at most {cap} connections {where} (half its descriptor limit)",
        ),
        _ => return None,
    };
    (idle + 1000 > cap).then(|| {
        format!(
            "{}: it cannot hold {idle} idle connections plus the load",
            what.replace("{cap}", &cap.to_string())
                .replace("{where}", where_)
        )
    })
}

/// Writes HAProxy's config as a reverse proxy in front of `origin` (HTTP mode, no cache, no
/// log, `option splice-auto`, one thread, origin connections kept and shared between clients
/// as nginx's `keepalive` pool does) and returns its argv, in the foreground (`-db`).
pub fn haproxy_argv(tmp: &Path, origin: SocketAddr, port: u16) -> std::io::Result<Vec<String>> {
    haproxy_conf(
        tmp,
        origin,
        loopback(port),
        haproxy_maxconn(),
        &program("haproxy"),
    )
    .write()
}

/// HAProxy in front of `origin` on `listen`, with `maxconn`.
pub fn haproxy_conf(
    tmp: &Path,
    origin: SocketAddr,
    listen: SocketAddr,
    maxconn: usize,
    haproxy: &str,
) -> PeerConf {
    let conf = tmp.join("haproxy.cfg");
    let lines = [
        "# Generated by evlab run: HAProxy as a peer of `evlab proxy`; no `log` line, so no log."
            .to_string(),
        "global".into(),
        "    nbthread 1".into(),
        "    no strict-limits".into(),
        format!("    maxconn {maxconn}"),
        format!("    maxpipes {HAPROXY_MAXPIPES}"),
        String::new(),
        "defaults".into(),
        "    mode http".into(),
        format!("    maxconn {maxconn}"),
        "    option splice-auto".into(),
        "    option http-keep-alive".into(),
        "    http-reuse always".into(),
        "    timeout connect 10s".into(),
        "    timeout client 600s".into(),
        "    timeout server 600s".into(),
        "    timeout http-request 600s".into(),
        "    timeout http-keep-alive 600s".into(),
        String::new(),
        "frontend measured".into(),
        format!("    bind {listen} backlog 4096"),
        "    default_backend origin".into(),
        String::new(),
        "backend origin".into(),
        format!("    server origin {origin} pool-max-conn 64 pool-purge-delay 600s"),
    ];
    PeerConf {
        text: lines.join("\n") + "\n",
        argv: vec![
            haproxy.to_string(),
            "-db".into(),
            "-f".into(),
            conf.display().to_string(),
        ],
        file: conf,
    }
}

/// Writes lighttpd's config (with `server.event-handler = handler`) and returns its argv.
pub fn lighttpd_argv(
    tmp: &Path,
    docroot: &Path,
    port: u16,
    handler: &str,
) -> std::io::Result<Vec<String>> {
    lighttpd_conf(tmp, docroot, loopback(port), handler, &program("lighttpd")).write()
}

/// lighttpd serving `docroot` on `listen` with `handler`.
pub fn lighttpd_conf(
    tmp: &Path,
    docroot: &Path,
    listen: SocketAddr,
    handler: &str,
    lighttpd: &str,
) -> PeerConf {
    let conf = tmp.join(format!("lighttpd-{handler}.conf"));
    PeerConf {
        text: format!(
            "server.document-root = \"{root}\"\nserver.bind = \"{ip}\"\nserver.port = {port}\n\
server.event-handler = \"{handler}\"\nserver.max-fds = 40000\nserver.max-connections = 30000\n\
server.max-keep-alive-requests = 100000000\nserver.max-keep-alive-idle = 600\n\
server.max-read-idle = 600\nserver.errorlog = \"{t}/lighttpd-error.log\"\n\
server.listen-backlog = 4096\n",
            root = docroot.display(),
            ip = listen.ip(),
            port = listen.port(),
            t = tmp.display()
        ),
        argv: vec![
            lighttpd.to_string(),
            "-D".into(),
            "-f".into(),
            conf.display().to_string(),
        ],
        file: conf,
    }
}

/// The config file a peer's argv names (nginx `-c FILE`, lighttpd and HAProxy `-f FILE`).
pub fn config_file(argv: &[String]) -> Option<&str> {
    argv.windows(2)
        .find(|w| w[0] == "-c" || w[0] == "-f")
        .map(|w| w[1].as_str())
}

/// The most connections lighttpd will accept when started by the runner: half its descriptor
/// limit (lighttpd's own rule), which is the runner's children's hard limit.
pub fn lighttpd_max_connections() -> usize {
    children_nofile().map_or(usize::MAX, |hard| hard / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_past_its_connection_cap_is_refused_where_it_runs() {
        // 20,000 descriptors: lighttpd takes half, 10,000, which 10,000 idle connections and
        // the load do not fit; HAProxy's maxconn is what is left beside its pipes.
        let why = cannot_hold(
            ServerKind::Lighttpd,
            false,
            10_000,
            20_000,
            "on the server host",
        );
        assert_eq!(
            why.as_deref(),
            Some(
                "lighttpd accepts at most 10000 connections on the server host (half its \
                 descriptor limit): it cannot hold 10000 idle connections plus the load"
            )
        );
        assert_eq!(
            cannot_hold(ServerKind::Lighttpd, false, 10_000, 65_536, "here"),
            None
        );
        assert_eq!(
            haproxy_maxconn_in(20_000),
            20_000 - 2 * HAPROXY_MAXPIPES - 256
        );
        assert!(cannot_hold(ServerKind::Haproxy, true, 15_000, 20_000, "here").is_some());
        assert_eq!(
            cannot_hold(ServerKind::Haproxy, true, 10_000, 20_000, "here"),
            None
        );
        assert_eq!(
            cannot_hold(ServerKind::Nginx, false, 100_000, 10, "here"),
            None
        );
    }

    #[test]
    fn parses_lighttpd_v() {
        let v =
            "lighttpd/1.4.69 (ssl)\n\nEvent Handlers:\n\n\t- select (generic)\n\t+ poll (Unix)\n\
\t+ epoll (Linux)\n\t- kqueue (FreeBSD)\n\nNetwork handler:\n\n\t+ linux-sendfile\n";
        assert_eq!(parse_lighttpd_handlers(v), ["poll", "linux-sysepoll"]);
    }
}
