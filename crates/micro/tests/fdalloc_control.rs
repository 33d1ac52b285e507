//! fdalloc's negative control on a real run. In a process of its own: the benchmark checks that
//! the kernel returned the descriptors it expects, which another test opening descriptors in
//! the same process would break.

use evlab_micro::fdalloc::{run, Config, Op};
use evlab_micro::Verdict;

/// A real run at a small size: the kernel's allocation and the control are measured alike, and
/// the same rule finds the control growing (a linear search, k near 1). Only the control's
/// verdict is asserted: the kernel's depends on the kernel.
#[test]
fn the_negative_control_is_not_reproduced_on_a_real_run() {
    let r = run(&Config {
        total: Some(4000),
        points: 4,
        repeat: 7,
        op: Op::Dup,
        ..Config::default()
    })
    .unwrap();
    let c = r.negative_control.as_ref().unwrap();
    assert_eq!(c.points.len(), 4);
    assert!(c.points.iter().all(|p| p.second_runs_ns.len() == 7));
    assert_eq!(c.slots, r.highest as usize + 1);
    assert_eq!(
        c.finding.verdict,
        Verdict::NotReproduced,
        "{}",
        c.finding.evidence
    );
    assert_eq!(r.findings.len(), 2);
    assert_eq!(r.findings[0].rule, "fdalloc-flat");
    assert_eq!(r.findings[1].rule, "fdalloc-negative-control");
    assert_eq!(r.findings[1].verdict, Verdict::NotReproduced);
    assert!(r.findings[1].evidence.contains("the control passes"));
    assert!(r.points.iter().all(|p| p.second_runs_ns.len() == 7));
    eprintln!("{}", evlab_micro::fdalloc::render(&r));
}
