use super::*;
use evlab_wire::load::Cpu;

fn cpu(percent: f64, quota: Option<f64>, throttled: Option<f64>) -> Cpu {
    Cpu {
        user_s: 0.0,
        system_s: 0.0,
        percent,
        quota_cpus: quota,
        throttled_s: throttled,
    }
}

#[test]
fn a_generator_is_saturated_at_its_quota_or_when_throttled_past_the_limit() {
    let spec = Spec::parse(
        "name = \"q\"\ndescription = \"d\"\nmechanisms = [\"poll\"]\nrates = [1]\n",
        "q.toml",
    )
    .unwrap();
    // No quota: the machine's CPUs judge it, not this.
    assert_eq!(quota_flag(&spec, &cpu(100.0, None, None), 2.0), None);
    // Half of a tenth of a CPU, never throttled: not saturated.
    assert_eq!(
        quota_flag(&spec, &cpu(5.0, Some(0.1), Some(0.0)), 2.0),
        None
    );
    // All of it.
    let f = quota_flag(&spec, &cpu(9.8, Some(0.1), Some(1.8)), 2.0).unwrap();
    assert!(f.starts_with("client saturated: the generator used 98% of its cgroup's CPU quota (0.10 CPU), throttled 1.80 s (90% of the run)"), "{f}");
    // Under 95% of it on average, but throttled for a tenth of the run.
    assert!(quota_flag(&spec, &cpu(8.0, Some(0.1), Some(0.2)), 2.0).is_some());
    assert!(quota_flag(&spec, &cpu(8.0, Some(0.1), Some(0.05)), 2.0).is_none());
}
