//! `evlab fileset`: creates the SPECweb99 static file set (see `docs/workloads.md`).

use std::path::PathBuf;

use evlab_load::fileset;
use evlab_load::workload::polymix::{self, SizeDist};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to create the file set in (serve it as the document root)
    pub dir: PathBuf,
    /// Number of SPECweb99 directories (36 files, 5,119,484 bytes each)
    #[arg(long, default_value_t = 10, value_parser = dirs_count)]
    pub dirs: usize,
    /// Write into a non-empty directory that does not look like a file set
    #[arg(long)]
    pub force: bool,
    /// Write the Polymix-like origin set instead: N cacheable objects under /polymix/c/ and N
    /// uncacheable ones under /polymix/u/ (for `evlab load --polymix`)
    #[arg(long, value_name = "N")]
    pub polymix: Option<usize>,
    /// Object sizes of the Polymix-like set: `polymix4` (log-normal, 4 KB median, fitted to the
    /// paper's percentiles) or BYTES for every object (K and M suffixes accepted)
    #[arg(long, default_value = "polymix4", value_name = "RULE")]
    pub object_size: String,
}

/// `--dirs`: 1 to the most the file set's layout numbers (`fileset::MAX_DIRS`).
fn dirs_count(s: &str) -> Result<usize, String> {
    let n = crate::args::count(s)?;
    if n > evlab_load::fileset::MAX_DIRS {
        return Err(format!(
            "'{s}': at most {} directories",
            evlab_load::fileset::MAX_DIRS
        ));
    }
    Ok(n)
}

fn parse_size(s: &str) -> anyhow::Result<SizeDist> {
    if s == "polymix4" {
        return Ok(SizeDist::POLYMIX4);
    }
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1024),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("--object-size {s}: expected polymix4 or BYTES (8K, 1M)"))?;
    Ok(SizeDist::Fixed(n * mult))
}

pub const EXAMPLES: &str = "\
Examples:
  evlab fileset /tmp/specweb --dirs 10
      10 directories of 36 files (about 49 MiB)
  evlab serve /tmp/specweb
      serve it; then, in another terminal, load it with the SPECweb99 mix:
  evlab load --specweb /tmp/specweb --rate 200 --num-conns 2000
  evlab fileset /tmp/polymix --polymix 10000
      the Polymix-like origin set: 10,000 cacheable and 10,000 uncacheable
      objects
  evlab fileset /tmp/pm-8k --polymix 5000 --object-size 8K
      every object 8 KiB (the paper's proxy microbenchmarks)";

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(n) = args.polymix {
        let sizes = parse_size(&args.object_size)?;
        if args.dir.exists() && !args.force {
            for e in std::fs::read_dir(&args.dir)? {
                let name = e?.file_name().to_string_lossy().into_owned();
                if name != "polymix" && name != polymix::MARKER {
                    anyhow::bail!(
                        "{} holds '{name}'; use --force to write the Polymix set into it anyway",
                        args.dir.display()
                    );
                }
            }
        }
        let s = polymix::create(&args.dir, n, sizes)
            .map_err(|e| anyhow::anyhow!("cannot create the Polymix file set: {e}"))?;
        println!(
            "fileset: {}: Polymix-like, {n} objects of each kind (sizes {}), {} files, {} bytes \
             ({:.1} MiB); serve it with --no-store-prefix /polymix/u/{}",
            args.dir.display(),
            sizes.to_spec(),
            s.files,
            s.total_bytes,
            s.total_bytes as f64 / (1024.0 * 1024.0),
            if s.unchanged > 0 {
                format!("; {} files already present and left unchanged", s.unchanged)
            } else {
                String::new()
            }
        );
        return Ok(());
    }
    // The error names the path at fault (which may be below DIR): not repeated here.
    let s = fileset::create(&args.dir, args.dirs, args.force)
        .map_err(|e| anyhow::anyhow!("cannot create the file set: {e}"))?;
    println!(
        "fileset: {}: {} directories, {} files, {} bytes ({:.1} MiB){}",
        args.dir.display(),
        s.dirs,
        s.files,
        s.total_bytes,
        s.total_bytes as f64 / (1024.0 * 1024.0),
        if s.unchanged > 0 {
            format!("; {} files already present and left unchanged", s.unchanged)
        } else {
            String::new()
        }
    );
    Ok(())
}
