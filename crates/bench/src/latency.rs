//! Latency samples per operation, merged across threads for percentiles.

use std::time::Duration;

#[derive(Default, Clone)]
pub struct Latencies {
    nanos: Vec<u64>,
}

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        self.nanos
            .push(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    pub fn merge(&mut self, other: Latencies) {
        self.nanos.extend(other.nanos);
    }

    pub fn count(&self) -> usize {
        self.nanos.len()
    }

    /// The `p`-th percentile (0..=100) in microseconds.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return 0.0;
        }
        self.nanos.sort_unstable();
        let rank = ((p / 100.0) * (self.nanos.len() - 1) as f64).round() as usize;
        self.nanos[rank.min(self.nanos.len() - 1)] as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut l = Latencies::default();
        for i in 1..=100 {
            l.record(Duration::from_micros(i));
        }
        assert_eq!(l.percentile_us(50.0), 51.0);
        assert_eq!(l.percentile_us(99.0), 99.0);
        assert_eq!(l.percentile_us(100.0), 100.0);
    }
}
