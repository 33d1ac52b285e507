//! CONNECT tunnels: a target of `--allow-connect` reached, and bytes relayed both ways until each
//! side has ended.

use super::*;

impl<E: Engine> Worker<E> {
    /// CONNECT to `target` (lower case): a tunnel if `--allow-connect` names it, else 403
    /// without connecting anywhere.
    pub(super) fn connect_tunnel(&mut self, c: &mut Client, target: &str, minor: u8, keep: bool) {
        let allowed = self
            .cfg
            .allow_connect
            .iter()
            .find(|t| t.name == target)
            .map(|t| t.addr);
        let Some(addr) = allowed else {
            self.error_response(c, Status::Forbidden, minor, keep && !c.close_after, false);
            return;
        };
        let target = match self.connect_to(addr, c.fd) {
            Ok(o) => o,
            Err(_) => {
                self.stats.origin_errors.inc();
                self.stats.bad_gateway.inc();
                self.error_response(c, Status::BadGateway, minor, false, false);
                return;
            }
        };
        let (mut up, mut down) = (Pump::default(), Pump::default());
        // Splice modes splice both ways (the paper's bidirectional splice), each way through
        // its own pipe; without two pipes, or in copy mode, both ways are copied.
        if self.cfg.forward.splices() && self.engine.can_splice() && self.pipes.available(2) {
            match (self.pipes.take(), self.pipes.take()) {
                (Ok(Some(a)), Ok(Some(b))) => (up.pipe, down.pipe) = (Some(a), Some(b)),
                (a, b) => {
                    for p in [a, b].into_iter().flat_map(|r| r.ok().flatten()) {
                        self.pipes.give(p);
                    }
                    self.stats.no_pipe.inc();
                }
            }
        }
        if up.pipe.is_none() {
            up.buf = self.take_buffer();
            down.buf = self.take_buffer();
        }
        // Bytes the client sent behind its CONNECT (a TLS hello, say) are the tunnel's first,
        // and an EOF read with them is passed on after them.
        up.buf.extend_from_slice(&c.rbuf);
        c.rbuf.clear();
        up.eof = c.peer_eof;
        c.tunnel = Some(Box::new(Tunnel {
            target,
            established: false,
            up,
            down,
        }));
        c.phase = Phase::Tunnel;
    }

    /// Relays what each side has to the other; a side's EOF is passed on as a shutdown of
    /// the other once what it sent is through. Closes when both ways have ended.
    pub(super) fn tunnel(&mut self, c: &mut Client) -> Step {
        let buffer_size = self.cfg.buffer_size;
        let mut progress = false;
        let t = c.tunnel.as_mut().expect("a tunnel");
        if !t.established {
            if t.target.f.hup {
                // The connection to the target failed.
                let t = c.tunnel.take().expect("a tunnel");
                self.drop_tunnel(*t);
                self.stats.origin_errors.inc();
                self.stats.bad_gateway.inc();
                self.error_response(c, Status::BadGateway, 1, false, false);
                c.phase = Phase::Idle;
                return Ok(true);
            }
            if !t.target.f.writable {
                return Ok(false);
            }
            t.established = true;
            t.target.connecting_since = None;
            c.out
                .extend_from_slice(b"HTTP/1.1 200 Connection Established\r\n\r\n");
            self.stats.record_status(200);
            let spliced = t.down.pipe.is_some();
            if let Some(e) = c.log.back_mut() {
                // Its line is written when the tunnel ends, with every byte it sent.
                e.status = 200;
                e.mode = if spliced { "splice" } else { "copy" };
            }
            progress = true;
        }
        progress |= self.write_client(c)?;
        let out_clear = c.out_pending() == 0;
        let cfd = c.fd;
        let t = c.tunnel.as_mut().expect("a tunnel");
        let (tfd, tf) = (t.target.fd, &mut t.target.f);
        progress |= pump(
            &mut self.engine,
            (cfd, &mut c.f),
            (tfd, tf),
            &mut t.up,
            true,
            buffer_size,
            &self.stats,
        )?;
        progress |= pump(
            &mut self.engine,
            (tfd, &mut t.target.f),
            (cfd, &mut c.f),
            &mut t.down,
            out_clear,
            buffer_size,
            &self.stats,
        )?;
        if progress {
            self.touch(c);
        }
        let t = c.tunnel.as_ref().expect("a tunnel");
        let up_done = t.up.shut;
        let down_done = t.down.shut;
        if up_done && down_done {
            return Err(Close);
        }
        // Hung up (both ways shut, or reset): what it sent has been passed on, and it takes
        // no more.
        if t.target.f.hup && down_done {
            return Err(Close);
        }
        if c.f.hup && up_done {
            return Err(Close);
        }
        Ok(progress)
    }

    pub(super) fn set_tunnel_interest(&mut self, c: &mut Client) -> bool {
        let out_pending = c.out_pending() > 0;
        let t = c.tunnel.as_mut().expect("a tunnel");
        let room = |p: &Pump| match &p.pipe {
            Some(pipe) => !pipe.full && pipe.room() > 0,
            None => p.pos == p.buf.len(),
        };
        let mut cw = Interest::NONE;
        if t.established && !t.up.eof && room(&t.up) {
            cw = cw.with(Interest::READABLE);
        }
        if out_pending || t.down.held() > 0 {
            cw = cw.with(Interest::WRITABLE);
        }
        let mut tw = Interest::NONE;
        if t.established && !t.down.eof && room(&t.down) {
            tw = tw.with(Interest::READABLE);
        }
        if !t.established || t.up.held() > 0 {
            tw = tw.with(Interest::WRITABLE);
        }
        for (fd, f, want) in [(c.fd, &mut c.f, cw), (t.target.fd, &mut t.target.f, tw)] {
            if want != f.interest {
                if self.engine.rewatch(fd, want).is_err() {
                    return false;
                }
                f.interest = want;
            }
        }
        true
    }

    pub(super) fn drop_tunnel(&mut self, mut t: Tunnel) {
        self.close_origin(t.target);
        for p in [&mut t.up, &mut t.down] {
            if let Some(pipe) = p.pipe.take() {
                self.give_pipe(pipe);
            }
            self.pool().give(std::mem::take(&mut p.buf));
        }
    }
}

/// Moves what `src` has to `dst` for a tunnel, through the pump's buffer or its pipe (bytes
/// in the buffer first: they came before any spliced), and shuts `dst`'s sending side once
/// `src` has ended and everything it sent is through. `may_write`: nothing is queued before
/// this pump's bytes on `dst`.
pub(super) fn pump<E: Engine>(
    io: &mut E,
    (src, sf): (RawFd, &mut Flags),
    (dst, df): (RawFd, &mut Flags),
    p: &mut Pump,
    may_write: bool,
    buffer_size: usize,
    stats: &WorkerStats,
) -> Step {
    let mut progress = false;
    for _ in 0..DRIVE_BUDGET {
        let mut moved = false;
        if !p.eof && sf.readable {
            let r = match p.pipe.as_mut() {
                Some(pipe) if !pipe.full && pipe.room() > 0 => {
                    Some(io.splice(src, pipe.wr, pipe.room(), src).inspect(|&n| {
                        pipe.len += n;
                        stats.bytes_splice.add(n as u64);
                    }))
                }
                None if p.pos == p.buf.len() => {
                    p.buf.clear();
                    p.pos = 0;
                    if p.buf.capacity() < buffer_size {
                        p.buf.reserve(buffer_size);
                    }
                    let r = io.read_max(src, &mut p.buf, buffer_size);
                    if let Ok(n) = r {
                        stats.bytes_copy.add(n as u64);
                        if n > 0 && n < buffer_size && !sf.peer_closed && !E::COMPLETION {
                            sf.readable = false;
                        }
                    }
                    Some(r)
                }
                _ => None,
            };
            match r {
                None => {}
                Some(Ok(0)) => {
                    p.eof = true;
                    moved = true;
                }
                Some(Ok(_)) => moved = true,
                Some(Err(e)) if pending(&e) => sf.readable = false,
                Some(Err(e)) if sys::would_block(&e) => match p.pipe.as_mut() {
                    // Full, or the socket is empty: drain the pipe, then try again.
                    Some(pipe) if pipe.len > 0 => pipe.full = true,
                    _ => sf.readable = false,
                },
                Some(Err(e)) if e.raw_os_error() == Some(libc::EINTR) => {}
                Some(Err(_)) => return Err(Close),
            }
        }
        if may_write && df.writable && p.pos < p.buf.len() {
            let want = p.buf.len() - p.pos;
            match io.write_parts(dst, &mut [Part::Owned(&mut p.buf, &mut p.pos)]) {
                Ok(n) => {
                    p.sent += n as u64;
                    moved = true;
                    if n < want {
                        df.writable = false;
                    }
                }
                Err(e) if sys::would_block(&e) || pending(&e) => df.writable = false,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return Err(Close),
            }
        }
        if may_write && df.writable && p.pos == p.buf.len() {
            if let Some(pipe) = p.pipe.as_mut().filter(|pipe| pipe.len > 0) {
                match io.splice(pipe.rd, dst, pipe.len, dst) {
                    Ok(0) => {}
                    Ok(n) => {
                        pipe.len -= n;
                        pipe.full = false;
                        p.sent += n as u64;
                        moved = true;
                    }
                    Err(e) if sys::would_block(&e) || pending(&e) => df.writable = false,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => return Err(Close),
                }
            }
        }
        if p.eof && p.held() == 0 && !p.shut {
            io.shutdown_write(dst);
            p.shut = true;
            moved = true;
        }
        progress |= moved;
        if !moved {
            break;
        }
    }
    Ok(progress)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::super::rig::{ok, Rig};
    use crate::ConnectTarget;

    /// CONNECT to a target not allowed: 403, nothing connected. To an allowed one: 200, then
    /// bytes both ways.
    #[test]
    fn connect_only_to_allowed_targets() {
        let target = TcpListener::bind("127.0.0.1:0").unwrap();
        let t = target.local_addr().unwrap().to_string();
        let allowed = t.clone();
        let mut r = Rig::new(
            move |c| c.allow_connect = vec![ConnectTarget::resolve(&allowed).unwrap()],
            |_| ok("x", ""),
        );
        let mut s = r.client();
        let no = r.ask(
            &mut s,
            "CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n",
        );
        assert_eq!(no.status, 403);
        let mut s = r.client();
        let yes = r.ask(
            &mut s,
            &format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n"),
        );
        assert_eq!(yes.status, 200);
        target.set_nonblocking(true).unwrap();
        let mut peer = loop {
            r.turn();
            if let Ok((p, _)) = target.accept() {
                break p;
            }
        };
        peer.set_nonblocking(true).unwrap();
        s.write_all(b"ping").unwrap();
        let mut got = Vec::new();
        for _ in 0..1000 {
            r.turn();
            let mut b = [0u8; 16];
            if let Ok(n) = peer.read(&mut b) {
                got.extend_from_slice(&b[..n]);
            }
            if got.len() == 4 {
                break;
            }
        }
        assert_eq!(got, b"ping");
    }
}
