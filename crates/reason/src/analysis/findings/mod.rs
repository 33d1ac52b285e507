//! The closing note: which of the seeds' findings a run reproduces, with the numbers. One module
//! per family (the experiment's `findings` key, [`Family`]).
//!
//! Each check applies only when the run measured what it needs (the mechanisms, the idle
//! counts); thresholds are stated in the text so that a reader can disagree with them.

use crate::model::results::Summary;
use crate::model::spec::Family;

mod common;
mod controls;
mod deadconn;
mod herd;
mod paper;
mod proxy;
mod table1;

pub use common::{decided, flag_kind, Finding, Verdict};
pub(crate) use common::{knee_trials, Side};
pub(crate) use controls::withhold_unguarded;
pub use controls::{
    chance_reproduced, claims_a_difference, negative_control_status, placebo_status,
    positive_control_status, ControlStatus,
};
pub use herd::accept_mode;
pub use paper::profile_point;
pub(crate) use proxy::{proxy_series, ProxySeries};

/// The findings of `s`, by the family its experiment names (`findings = "…"`), or, for a
/// summary written before the key existed, the family its shape implies.
/// A paper run whose negative control did not pass has its "no difference" verdicts withheld.
pub fn findings(s: &Summary) -> Vec<Finding> {
    let mut fs = by_rules(s);
    if s.experiment.family() == Family::Paper {
        controls::withhold_unguarded(&mut fs);
    }
    fs
}

/// What each rule decides on its own, before the controls are read.
pub(crate) fn by_rules(s: &Summary) -> Vec<Finding> {
    match s.experiment.family() {
        Family::Paper => paper::findings(s),
        Family::Proxy => proxy::findings(s),
        Family::Herd => herd::findings(s),
        Family::Deadconn => deadconn::findings(s),
        // A micro-benchmark's report is judged by `analysis::micro`; a sweep has none of them.
        Family::None | Family::Micro => Vec::new(),
    }
}

#[cfg(test)]
mod judged_tests;
#[cfg(test)]
mod null_tests;
#[cfg(test)]
pub(crate) mod tests;
