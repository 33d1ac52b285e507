//! `evlab micro`: the Linux Scalability Project's micro-benchmarks, descriptor allocation and
//! malloc (see `docs/micro.md`, `evlab_micro::fdalloc` and `evlab_micro::malloc`).

use std::path::PathBuf;

use evlab_micro::{fdalloc, malloc, readahead};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub bench: Bench,
}

#[derive(clap::Subcommand, Debug)]
pub enum Bench {
    /// Hold many descriptors, close the first and the n-th, time the next two opens
    #[command(after_help = FDALLOC_EXAMPLES)]
    Fdalloc(FdallocArgs),
    /// Balanced malloc/free pairs across threads and processes (glibc's allocator)
    #[command(after_help = MALLOC_EXAMPLES)]
    Malloc(MallocArgs),
    /// Files sent over a socket from a cold or warm page cache: read, mmap (plain or advised),
    /// sendfile
    #[command(after_help = READAHEAD_EXAMPLES)]
    Readahead(ReadaheadArgs),
}

impl Bench {
    /// The subcommand's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Bench::Fdalloc(_) => "fdalloc",
            Bench::Malloc(_) => "malloc",
            Bench::Readahead(_) => "readahead",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct FdallocArgs {
    /// Descriptors to hold (default: 100,000, or the limit less 64 if lower)
    #[arg(long)]
    pub total: Option<usize>,
    /// Descriptors n to close, comma-separated (default: --points spread over the table)
    #[arg(long, value_parser = parse_fds)]
    pub at: Option<std::vec::Vec<u64>>,
    /// How many n to spread over the table when --at is not given
    #[arg(long, default_value_t = 20)]
    pub points: usize,
    /// Rounds: measurements per n, interleaved over the n; the table shows medians, and the
    /// finding is decided on the 90% interval of the rounds' fits, which needs at least 3
    #[arg(long, default_value_t = 11)]
    pub repeat: usize,
    /// The call timed: open (/dev/null, as the LSP did) or dup (the allocation alone)
    #[arg(long, default_value = "open", value_parser = parse_op)]
    pub op: fdalloc::Op,
    /// Write the report as JSON to this file (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct MallocArgs {
    /// Numbers of workers, comma-separated
    #[arg(long, default_value = "1,2,4,8,16,32,64", value_parser = evlab_micro::parse_counts)]
    pub workers: std::vec::Vec<usize>,
    /// Workers as threads, processes (forked), or both
    #[arg(long, default_value = "both", value_parser = ["threads", "processes", "both"])]
    pub mode: String,
    /// malloc/free pairs per worker
    #[arg(long, default_value_t = 10_000_000)]
    pub iterations: u64,
    /// Bytes per allocation (or with K/M)
    #[arg(long, value_name = "SIZE", default_value = "512", value_parser = crate::args::size)]
    pub size: usize,
    /// Rounds: every point once per round, the rounds one after the other; the table shows
    /// medians, and the findings are decided on the interval over the rounds (at least 3)
    #[arg(long, default_value_t = evlab_micro::malloc::REPEAT)]
    pub repeat: usize,
    /// Write the report as JSON to this file (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ReadaheadArgs {
    /// File sizes, comma-separated (K, M, G: powers of 1,024)
    #[arg(long, value_name = "SIZE,...", default_value = "64K,1M,16M,64M", value_parser = parse_sizes)]
    pub sizes: std::vec::Vec<u64>,
    /// Ways of sending: all, or a comma-separated list of read, mmap, mmap-sequential,
    /// mmap-willneed, sendfile
    #[arg(long, default_value = "all", value_parser = parse_ways)]
    pub ways: std::vec::Vec<readahead::Way>,
    /// Page cache state before each send: cold (pages dropped), warm (just read) or both
    #[arg(long, default_value = "both", value_parser = ["cold", "warm", "both"])]
    pub cache: String,
    /// Rounds: every point once per round; the findings are decided on the interval over them
    /// (at least 3)
    #[arg(long, default_value_t = readahead::REPEAT, value_parser = crate::args::count)]
    pub repeat: usize,
    /// Where to make the files: a directory on a disk (tmpfs cannot be made cold); default a
    /// new directory under /var/tmp, removed at the end
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the report as JSON to this file (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_sizes(s: &str) -> Result<std::vec::Vec<u64>, String> {
    let v: std::vec::Vec<u64> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(crate::args::bytes)
        .collect::<Result<_, _>>()?;
    if v.is_empty() || v.contains(&0) {
        return Err(format!(
            "'{s}': give one or more sizes, each at least 1 byte"
        ));
    }
    Ok(v)
}

fn parse_ways(s: &str) -> Result<std::vec::Vec<readahead::Way>, String> {
    if s.trim() == "all" {
        return Ok(readahead::Way::ALL.to_vec());
    }
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            readahead::Way::from_name(p).ok_or_else(|| {
                format!(
                    "unknown way '{p}'; valid: all, {}",
                    readahead::Way::ALL.map(|w| w.name()).join(", ")
                )
            })
        })
        .collect()
}

fn parse_fds(s: &str) -> Result<std::vec::Vec<u64>, String> {
    Ok(evlab_micro::parse_counts(s)?
        .into_iter()
        .map(|n| n as u64)
        .collect())
}

fn parse_op(s: &str) -> Result<fdalloc::Op, String> {
    fdalloc::Op::from_name(s).ok_or_else(|| format!("unknown op '{s}'; valid: open, dup"))
}

pub const EXAMPLES: &str = "\
Examples:
  evlab micro fdalloc
      the cost of the next two opens after closing the n-th of many descriptors
  evlab micro malloc --json malloc.json
      balanced malloc/free pairs across threads and processes, the report as
      JSON too

Exit status: 0 when the benchmark ran; 1 on an error; 2 on a usage error.";

const FDALLOC_EXAMPLES: &str = "\
Examples:
  evlab micro fdalloc
      about 20 values of n spread over the descriptor table, 11 interleaved
      rounds
  evlab micro fdalloc --at 1000,10000 --repeat 5 --op dup --json fd.json
      two values of n, the allocation alone (dup), the report as JSON too

Exit status: 0 when the benchmark ran; 1 on an error; 2 on a usage error.";

const MALLOC_EXAMPLES: &str = "\
Examples:
  evlab micro malloc
      1 to 64 workers, threads and processes, 10 million pairs each, 5 rounds
  evlab micro malloc --workers 1,2 --mode threads --iterations 1000000
      a short run of one or two threads

Exit status: 0 when the benchmark ran; 1 on an error; 2 on a usage error.";

const READAHEAD_EXAMPLES: &str = "\
Examples:
  evlab micro readahead
      64 KiB to 64 MiB, cold and warm, every way of sending, 5 rounds (files
      under /var/tmp)
  evlab micro readahead --sizes 16M --cache cold --ways read,sendfile \\
    --repeat 3 --json ra.json
      cold 16 MiB files, read and write against sendfile, the report as JSON
      too

Exit status: 0 when the benchmark ran; 1 on an error; 2 on a usage error.";

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.bench {
        Bench::Fdalloc(a) => run_fdalloc(a),
        Bench::Malloc(a) => run_malloc(a),
        Bench::Readahead(a) => run_readahead(a),
    }
}

fn run_readahead(a: ReadaheadArgs) -> anyhow::Result<()> {
    let caches = match a.cache.as_str() {
        "cold" => vec![readahead::Cache::Cold],
        "warm" => vec![readahead::Cache::Warm],
        _ => vec![readahead::Cache::Cold, readahead::Cache::Warm],
    };
    let cfg = readahead::Config {
        ways: a.ways,
        caches,
        sizes: a.sizes,
        repeat: a.repeat,
        dir: a.dir,
    };
    let r = readahead::run(&cfg, |p| {
        let what = match p.status {
            readahead::Status::Ok => {
                format!("{:.4} s, {:.0} us CPU per MiB", p.seconds, p.cpu_us_per_mib)
            }
            s => format!("{s:?}: {}", p.reason.as_deref().unwrap_or("")),
        };
        eprintln!(
            "readahead: round {} {} {} B {}: {what}",
            p.round + 1,
            p.cache.name(),
            p.size,
            p.way.name()
        );
    })?;
    Ok(evlab_micro::emit(&r, a.json.as_deref(), || {
        readahead::render(&r)
    })?)
}

fn run_fdalloc(a: FdallocArgs) -> anyhow::Result<()> {
    let cfg = fdalloc::Config {
        total: a.total,
        at: a.at,
        points: a.points,
        repeat: a.repeat,
        op: a.op,
    };
    let r = fdalloc::run(&cfg)?;
    Ok(evlab_micro::emit(&r, a.json.as_deref(), || {
        fdalloc::render(&r)
    })?)
}

fn run_malloc(a: MallocArgs) -> anyhow::Result<()> {
    let modes = match a.mode.as_str() {
        "threads" => vec![malloc::Mode::Threads],
        "processes" => vec![malloc::Mode::Processes],
        _ => vec![malloc::Mode::Threads, malloc::Mode::Processes],
    };
    let cfg = malloc::Config {
        modes,
        workers: a.workers,
        iterations: a.iterations,
        size: a.size,
        repeat: a.repeat,
    };
    let r = malloc::run(&cfg, |p| {
        eprintln!(
            "malloc: {} {}: {:.3} s wall, {:.1} ns/pair",
            p.workers,
            p.mode.name(),
            p.wall_seconds,
            p.ns_per_pair
        );
    })?;
    Ok(evlab_micro::emit(&r, a.json.as_deref(), || {
        malloc::render(&r)
    })?)
}
