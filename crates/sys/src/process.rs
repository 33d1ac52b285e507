//! Safe wrappers for the process-level calls the rest of evlab makes: resource limits and usage,
//! `malloc_trim`, users and capabilities, signals, `uname`, `sysconf`, `mkfifo`, and what a child
//! does between fork and exec.
//!
//! None of these is on a hot path, so none is counted. They live here because evlab keeps
//! `unsafe` in this crate: every other crate calls these instead of `libc` directly.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

// ---- descriptor limit ----

/// The soft and hard limits on open descriptors (RLIMIT_NOFILE).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit struct.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Sets the soft and hard limits on open descriptors (raising the hard one needs privilege).
pub fn set_nofile_limit(soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is a valid rlimit struct, read by the call.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        set_nofile_limit(hard, hard)?;
    }
    Ok(hard.max(soft))
}

// ---- resource usage ----

/// CPU time from `getrusage`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTime {
    pub fn total(&self) -> Duration {
        self.user + self.system
    }
}

/// What `getrusage` says about a thread, a process or its children: CPU time and context
/// switches.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu: CpuTime,
    /// Voluntary context switches: each time the thread slept (blocked in a wait).
    pub voluntary: u64,
    /// Involuntary context switches: each time the scheduler took the CPU away.
    pub involuntary: u64,
}

impl Usage {
    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            cpu: CpuTime {
                user: self.cpu.user.saturating_sub(earlier.cpu.user),
                system: self.cpu.system.saturating_sub(earlier.cpu.system),
            },
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// Whose usage `getrusage` reports.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// The calling thread (RUSAGE_THREAD).
    Thread,
    /// This process, every thread (RUSAGE_SELF).
    Process,
    /// This process's children that have ended and been waited for (RUSAGE_CHILDREN).
    Children,
}

/// getrusage(2): evlab's one wrapper of it.
pub fn getrusage(who: Who) -> io::Result<Usage> {
    let who = match who {
        Who::Thread => libc::RUSAGE_THREAD,
        Who::Process => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    // SAFETY: rusage is plain integers, for which all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; `who` is one of the three values it accepts.
    check(unsafe { libc::getrusage(who, &mut ru) })?;
    let d = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec.max(0) as u64)
            + Duration::from_micros(tv.tv_usec.max(0) as u64)
    };
    Ok(Usage {
        cpu: CpuTime {
            user: d(ru.ru_utime),
            system: d(ru.ru_stime),
        },
        voluntary: ru.ru_nvcsw.max(0) as u64,
        involuntary: ru.ru_nivcsw.max(0) as u64,
    })
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc/PID/stat` times.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (t > 0).then_some(t as u64)
}

// ---- memory ----

/// glibc's `malloc_trim(0)`: gives the kernel back the free memory of every malloc arena (its
/// top and whole free pages inside it), so that RSS follows what is in use rather than the
/// highest it ever was. Returns whether anything was released; always false where the C
/// library is not glibc. Not counted: it is a library call (its madvise calls are the kernel's).
pub fn malloc_trim() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes a size and touches only the allocator's own state.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

// ---- users and capabilities ----

/// The effective user id of this process.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// The name of the user `uid` in the password database (`getpwuid_r`), if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: all-zero is a valid passwd (null pointers, zero numbers); getpwuid_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, and `buf.len()` is the length of `buf`; the
    // strings it sets point into `buf`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name is a NUL-terminated string in `buf`, which is still alive.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// One 32-bit word of each capability set (`struct __user_cap_data_struct`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// _LINUX_CAPABILITY_VERSION_3: two words of each set.
const CAP_VERSION_3: u32 = 0x2008_0522;

fn capget_or_set(nr: libc::c_long, data: &mut [CapData; 2]) -> io::Result<()> {
    let mut h = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    // SAFETY: a version-3 header and the two data words it describes, both live and writable
    // for the call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(nr, &mut h as *mut CapHeader, data.as_mut_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's capabilities (capget(2)): words 0 and 1 of each set.
pub fn capabilities() -> io::Result<[CapData; 2]> {
    let mut d = [CapData::default(); 2];
    capget_or_set(libc::SYS_capget, &mut d)?;
    Ok(d)
}

/// Sets the calling thread's capabilities (capset(2)): only lowering them, unless privileged.
pub fn set_capabilities(mut data: [CapData; 2]) -> io::Result<()> {
    capget_or_set(libc::SYS_capset, &mut data)
}

// ---- uname ----

/// What `uname(2)` says about this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uname {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

pub fn uname() -> io::Result<Uname> {
    // SAFETY: utsname is arrays of chars, for which all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is valid for writing.
    check(unsafe { libc::uname(&mut u) })?;
    let s = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(Uname {
        sysname: s(&u.sysname),
        nodename: s(&u.nodename),
        release: s(&u.release),
        version: s(&u.version),
        machine: s(&u.machine),
    })
}

// ---- files ----

/// Creates a named pipe at `path`.
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    check(unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) })
}

/// readlinkat(2): the target of the symlink `path` relative to `dir` (an empty `path` with an
/// `O_PATH | O_NOFOLLOW` descriptor of the link itself reads that link), into `buf`. A target
/// that fills `buf` entirely may have been cut: ENAMETOOLONG.
pub fn readlinkat(dir: BorrowedFd<'_>, path: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `path` is NUL-terminated; `buf` is valid for writing `buf.len()` bytes.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            path.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n >= buf.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    Ok(n)
}

/// Swaps two paths atomically (renameat2 with RENAME_EXCHANGE): both must exist; either may be
/// a directory or a symlink.
pub fn rename_exchange(a: &Path, b: &Path) -> io::Result<()> {
    let cstr = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
    };
    let (a, b) = (cstr(a)?, cstr(b)?);
    // SAFETY: `a` and `b` are NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

// ---- signals ----

/// Sends `sig` to the process `pid`.
pub fn kill(pid: u32, sig: libc::c_int) -> io::Result<()> {
    if pid == 0 || pid > i32::MAX as u32 {
        // 0 would signal our own group, and a wrapped value a group or every process.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill(2) takes plain integers; no memory is involved.
    check(unsafe { libc::kill(pid as libc::pid_t, sig) })
}

/// Sends `sig` to every process of the group `pgid` (`kill(-pgid, sig)`).
pub fn kill_process_group(pgid: u32, sig: libc::c_int) -> io::Result<()> {
    if pgid == 0 || pgid > i32::MAX as u32 {
        // 0 would signal our own group, and a wrapped value every process we may signal.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill(2) takes plain integers; no memory is involved.
    check(unsafe { libc::kill(-(pgid as libc::pid_t), sig) })
}

/// Sets `sig`'s disposition to ignore (SIGPIPE, so that writes to a reset peer fail with EPIPE).
pub fn ignore_signal(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: SIG_IGN is a valid disposition for any catchable signal.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

const MAX_NOTIFY_FDS: usize = 1024;

static NOTIFY_FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
static NOTIFY_FDS: [AtomicI32; MAX_NOTIFY_FDS] = [const { AtomicI32::new(-1) }; MAX_NOTIFY_FDS];
static NOTIFY_NFDS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn notify(_sig: libc::c_int) {
    let flag = NOTIFY_FLAG.load(SeqCst);
    if !flag.is_null() {
        // SAFETY: only `route_signals` stores here, and only a `&'static AtomicBool`.
        unsafe { &*flag }.store(true, SeqCst);
    }
    let one = 1u64.to_ne_bytes();
    let n = NOTIFY_NFDS.load(SeqCst).min(MAX_NOTIFY_FDS);
    for slot in NOTIFY_FDS.iter().take(n) {
        let fd = slot.load(SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; `one` is 8 valid bytes. Not counted: the
            // counters are thread-local and may not be touched from a handler.
            unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) };
        }
    }
}

/// Sets `sig`'s disposition back to the default (for SIGINT: end the process), so that a second
/// Ctrl-C stops a program that caught the first one to wind down.
pub fn default_signal(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: SIG_DFL is a valid disposition for any signal.
    if unsafe { libc::signal(sig, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Routes the signals `sigs` to `flag` and `wakers`: when one arrives, the handler sets `flag`
/// and writes an 8-byte 1 to each waker — an eventfd, or the write end of a pipe — so that loops
/// sleeping in their event mechanism wake up. The handler is this crate's and only does
/// async-signal-safe things. A later call replaces the routing for every signal routed so far.
/// At most 1,024 wakers are written to.
pub fn route_signals(
    sigs: &[libc::c_int],
    flag: &'static AtomicBool,
    wakers: &[RawFd],
) -> io::Result<()> {
    let n = wakers.len().min(MAX_NOTIFY_FDS);
    NOTIFY_NFDS.store(0, SeqCst);
    for (slot, &fd) in NOTIFY_FDS.iter().zip(&wakers[..n]) {
        slot.store(fd, SeqCst);
    }
    NOTIFY_NFDS.store(n, SeqCst);
    NOTIFY_FLAG.store(flag as *const AtomicBool as *mut AtomicBool, SeqCst);
    for &sig in sigs {
        // SAFETY: sigaction is plain data, for which all-zero is a valid value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = notify as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset to initialise.
        check(unsafe { libc::sigemptyset(&mut sa.sa_mask) })?;
        // SAFETY: the handler only touches atomics and calls write(2), all async-signal-safe.
        check(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) })?;
    }
    Ok(())
}

// ---- between fork and exec ----

/// What a child process does between fork and exec, before running its program.
#[derive(Clone, Debug, Default)]
pub struct ChildSetup {
    /// Raise the child's descriptor limits (soft and hard) to this, where the hard limit is
    /// lower and the raise is allowed; left as it is otherwise.
    pub nofile: Option<u64>,
    /// Lower the child's descriptor limits (soft and hard) to this, so that it cannot raise
    /// them again; spawning fails if that is refused.
    pub nofile_cap: Option<u64>,
    /// A cgroup's `cgroup.procs`, open for writing, to join (so the program's whole tree is in
    /// the group). The descriptor must stay open until the command is spawned.
    pub cgroup_procs: Option<RawFd>,
    /// CPUs to pin the child to; empty: not pinned.
    pub cpus: Vec<usize>,
    /// A signal the child gets when the thread that spawned it ends (`PR_SET_PDEATHSIG`), so
    /// that a parent killed outright (a test process past its timeout) takes the child along.
    /// It is tied to the spawning thread, not the process: spawn from a thread that outlives
    /// the child. Spawning fails if the parent is already gone when the child sets it.
    pub parent_death_signal: Option<libc::c_int>,
}

impl ChildSetup {
    /// Makes `cmd`'s children apply this setup before exec; spawning fails if joining the cgroup
    /// or pinning does.
    pub fn apply_to(self, cmd: &mut Command) {
        let ChildSetup {
            nofile,
            nofile_cap,
            cgroup_procs,
            cpus,
            parent_death_signal,
        } = self;
        let parent = std::process::id() as libc::pid_t;
        let hook = move || -> io::Result<()> {
            if let Some(sig) = parent_death_signal {
                // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers; async-signal-safe.
                check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) })?;
                // The parent may have died between fork and prctl: then nobody would signal.
                // (ESRCH: an error that needs no allocation, which is not allowed here.)
                // SAFETY: getppid takes nothing and cannot fail; async-signal-safe.
                if unsafe { libc::getppid() } != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            if let Some(want) = nofile {
                let mut have = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: `have` is valid for writing; getrlimit is async-signal-safe.
                if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut have) } == 0
                    && have.rlim_max < want
                {
                    let lim = libc::rlimit {
                        rlim_cur: want,
                        rlim_max: want,
                    };
                    // SAFETY: `lim` is a valid rlimit; setrlimit is async-signal-safe. A
                    // refusal leaves the limit as it was, which is what is wanted.
                    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
                }
            }
            if let Some(cap) = nofile_cap {
                let lim = libc::rlimit {
                    rlim_cur: cap,
                    rlim_max: cap,
                };
                // SAFETY: `lim` is a valid rlimit; setrlimit is async-signal-safe.
                check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
            }
            if let Some(fd) = cgroup_procs {
                // SAFETY: the buffer is a static byte string; write(2) is async-signal-safe.
                // A descriptor that is not open fails with EBADF and so does the spawn.
                if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            if !cpus.is_empty() {
                // SAFETY: cpu_set_t is a bit array, for which all-zero is the empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // A CPU past the set's size would index out of bounds, and a panic here (after
                // fork) must not happen: such numbers are skipped.
                for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
                    // SAFETY: `set` is a valid cpu_set_t and `c` is within it.
                    unsafe { libc::CPU_SET(c, &mut set) };
                }
                // SAFETY: `set` is a valid cpu_set_t of the size given; async-signal-safe.
                let rc = unsafe {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
                };
                check(rc)?;
            }
            Ok(())
        };
        // SAFETY: the hook runs between fork and exec and makes only prctl, getppid,
        // getrlimit, setrlimit, write and sched_setaffinity, which are async-signal-safe; it
        // allocates nothing (the CPU list was moved in before the fork; its errors are raw OS
        // errors) and takes no lock.
        unsafe {
            cmd.pre_exec(hook);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_usage_and_uname_answer() {
        let (soft, hard) = nofile_limit().unwrap();
        assert!(soft <= hard);
        assert!(raise_fd_limit().unwrap() >= soft);
        let t = getrusage(Who::Process).unwrap().cpu;
        assert!(t.total() >= t.user);
        assert!(getrusage(Who::Children).is_ok());
        assert!(clock_ticks_per_second().unwrap() > 0);
        let u = uname().unwrap();
        assert_eq!(u.sysname, "Linux");
        assert!(!u.release.is_empty());
    }

    #[test]
    fn users_and_capabilities_answer() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        let me = geteuid();
        let caps = capabilities().unwrap();
        if me == 0 {
            assert_ne!(caps[0].effective, 0, "{caps:?}");
        }
        // Setting what is already set changes nothing and is allowed.
        set_capabilities(caps).unwrap();
        assert_eq!(capabilities().unwrap(), caps);
    }

    #[test]
    fn usage_counts_a_sleep_as_a_voluntary_switch() {
        let before = getrusage(Who::Thread).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let d = getrusage(Who::Thread).unwrap().since(&before);
        assert!(d.voluntary >= 1, "{d:?}");
        assert!(getrusage(Who::Process).unwrap().voluntary >= d.voluntary);
    }

    #[test]
    fn mkfifo_makes_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let p = std::env::temp_dir().join(format!("evlab-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        mkfifo(&p, 0o600).unwrap();
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
        std::fs::remove_file(&p).unwrap();
        assert!(kill_process_group(0, 0).is_err(), "group 0 is refused");
        assert!(kill(0, 0).is_err(), "pid 0 is refused");
        kill(std::process::id(), 0).expect("signal 0 to ourselves");
    }

    #[test]
    fn child_setup_pins_and_caps_the_child() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "grep Cpus_allowed_list /proc/self/status; grep 'Max open files' /proc/self/limits",
        ]);
        ChildSetup {
            cpus: vec![0],
            nofile_cap: Some(64),
            ..ChildSetup::default()
        }
        .apply_to(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let cpus = lines.next().unwrap_or_default();
        assert!(cpus.trim_end().ends_with(":\t0"), "{text}");
        let limits: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(limits[3..5], ["64", "64"], "{text}");
    }
}
