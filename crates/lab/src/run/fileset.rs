//! The file sets a point's server serves (SPECweb's, Polymix's), made once per run by `evlab
//! fileset`, here or on a host.

use std::path::{Path, PathBuf};

use crate::run::progress::Progress;
use evlab_reason::model::spec::Spec;
use evlab_reason::LabError;

/// The file set of a series with its own object size, beside the run's.
pub(crate) fn polymix_dir(base: &Path, size: &str) -> PathBuf {
    base.with_file_name(format!(
        "polymix-{}",
        size.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    ))
}

/// `evlab fileset DIR --dirs N` for the spec's SPECweb99 workload.
pub(crate) fn specweb_fileset_argv(evlab: &Path, spec: &Spec, dir: &Path) -> Vec<String> {
    vec![
        evlab.display().to_string(),
        "fileset".into(),
        dir.display().to_string(),
        "--dirs".into(),
        spec.fileset_dirs.to_string(),
    ]
}

/// `evlab fileset DIR --polymix N --object-size S --force` for the spec's Polymix workload.
pub(crate) fn polymix_fileset_argv(
    evlab: &Path,
    spec: &Spec,
    size: &str,
    dir: &Path,
) -> Vec<String> {
    vec![
        evlab.display().to_string(),
        "fileset".into(),
        dir.display().to_string(),
        "--polymix".into(),
        spec.polymix_objects.to_string(),
        "--object-size".into(),
        size.to_string(),
        "--force".into(),
    ]
}

/// Runs `evlab fileset …` (said on the progress line), its output discarded.
pub(crate) fn make_fileset(argv: &[String], progress: &Progress) -> Result<(), LabError> {
    progress.note(&format!(
        "evlab run: {}",
        evlab_reason::model::text::shell_line(argv)
    ));
    let st = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::null())
        .status()?;
    if !st.success() {
        return Err(LabError::Io(format!(
            "`{}` failed ({st})",
            evlab_reason::model::text::shell_line(argv)
        )));
    }
    Ok(())
}
