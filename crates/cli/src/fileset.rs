//! `evlab fileset`: creates the SPECweb99 static file set (see `docs/workloads.md`).

use std::path::PathBuf;

use evlab_load::fileset;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to create the file set in (serve it as the document root)
    pub dir: PathBuf,
    /// Number of SPECweb99 directories (36 files, 5,119,484 bytes each)
    #[arg(long, default_value_t = 10)]
    pub dirs: usize,
    /// Write into a non-empty directory that does not look like a file set
    #[arg(long)]
    pub force: bool,
}

pub const EXAMPLES: &str = "\
Examples:
  evlab fileset /tmp/specweb --dirs 10
      10 directories of 36 files (about 49 MiB)
  evlab serve --root /tmp/specweb
      serve it; then, in another terminal, load it with the SPECweb99 request mix:
  evlab load --specweb /tmp/specweb --rate 200 --num-conns 2000";

pub fn run(args: Args) -> anyhow::Result<()> {
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
