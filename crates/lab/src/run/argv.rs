//! The command lines of evlab's own roles (after the binary): `evlab serve` measured, `evlab
//! proxy` in front of its origin, and the origin's `evlab serve`. Built here once, for a point on
//! this machine (`point`) and across hosts (`remote`, `remote_proxy`) alike, so that both run the
//! same server with the same flags.

use std::net::SocketAddr;

use evlab_reason::model::spec::{ProxySpec, Series, Spec, Workload};

/// The measured `evlab serve` arguments of series `s` on `listen`, serving `root`: the series'
/// mechanism, counters on (`--stats`, and `--profile` when the spec asks), the spec's server
/// flags and then the series' own.
pub(crate) fn serve_args(spec: &Spec, s: &Series, listen: &str, root: &str) -> Vec<String> {
    let mut v = vec![
        "serve".into(),
        "--listen".into(),
        listen.into(),
        "--root".into(),
        root.into(),
        "--mechanism".into(),
        s.mechanism.clone(),
        "--stats".into(),
    ];
    if spec.profile {
        v.push("--profile".into());
    }
    v.extend(spec.server_flags.iter().cloned());
    v.extend(s.flags.iter().cloned());
    v
}

/// The `evlab proxy` arguments (after the binary) of series `s` on `listen`, in front of
/// `origin`, with the spec's `[proxy] proxy_flags` before the series' own: on this machine and
/// on a server host alike.
pub(crate) fn proxy_args(spec: &Spec, s: &Series, listen: &str, origin: SocketAddr) -> Vec<String> {
    let mut v = vec![
        "proxy".into(),
        "--listen".into(),
        listen.into(),
        "--origin".into(),
        origin.to_string(),
        "--mechanism".into(),
        s.mechanism.clone(),
        "--stats".into(),
    ];
    if let Some(px) = &spec.proxy {
        v.extend(px.proxy_flags.iter().cloned());
    }
    v.extend(s.flags.iter().cloned());
    v
}

/// The origin's `evlab serve` arguments (after the binary): epoll-et on `listen`, serving
/// `root`, no header timeout, the spec's origin flags (and, for the Polymix workload, its
/// uncacheable prefix): on this machine and on an origin host alike.
pub(crate) fn origin_args(spec: &Spec, px: &ProxySpec, listen: &str, root: &str) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        listen.into(),
        "--root".into(),
        root.into(),
        "--mechanism".into(),
        "epoll-et".into(),
        "--header-timeout".into(),
        "0".into(),
    ];
    if spec.workload == Workload::Polymix {
        v.extend(["--no-store-prefix".into(), "/polymix/u/".into()]);
    }
    v.extend(px.origin_flags.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_gets_the_series_mechanism_then_the_spec_flags_then_its_own() {
        let spec = Spec::parse(
            "name = 'a'\nmechanisms = ['poll']\nrates = [1]\nprofile = true\n\
             server_flags = ['--workers', '2']\n",
            "t.toml",
        )
        .unwrap();
        let mut s = spec.series_list(&|_| true, &[]).remove(0);
        s.flags = vec!["--accept-limit".into(), "1".into()];
        assert_eq!(
            serve_args(&spec, &s, "10.0.0.1:0", "/srv/d").join(" "),
            "serve --listen 10.0.0.1:0 --root /srv/d --mechanism poll --stats --profile \
             --workers 2 --accept-limit 1"
        );
    }
}
