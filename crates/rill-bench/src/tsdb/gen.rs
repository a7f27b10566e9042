//! The benchmark's data, seeded: in the spirit of TSBS's IoT case, many
//! sensors with five fields each at realistic precision, a sample every
//! interval with jitter, some samples missing and some arriving late
//! (out of order), as line protocol in time order.

/// A sensor's state as its readings wander.
struct Sensor {
    temperature: f64,
    humidity: f64,
    pressure: f64,
    battery: i64,
    packets: u64,
}

/// xorshift64*: fast, seeded, good enough for data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Plan {
    pub sensors: usize,
    pub start_ms: i64,
    pub end_ms: i64,
    pub interval_ms: i64,
    pub seed: u64,
}

/// Fields per point.
pub const FIELDS: [&str; 5] = ["temperature", "humidity", "pressure", "battery", "packets"];

pub fn sensor_name(i: usize) -> String {
    format!("s{i:05}")
}

/// Line protocol of the whole plan, in batches of about `lines_per_batch`
/// lines, each handed to `emit` with its number of samples (5 a line).
/// 2 % of the samples are missing and 1 % of the lines arrive in the
/// next batch (late).
pub fn generate(plan: &Plan, lines_per_batch: usize, mut emit: impl FnMut(String, u64)) {
    let mut rng = Rng::new(plan.seed);
    let mut sensors: Vec<Sensor> = (0..plan.sensors)
        .map(|_| Sensor {
            temperature: 15.0 + rng.unit() * 15.0,
            humidity: 30.0 + rng.unit() * 40.0,
            pressure: 1000.0 + rng.unit() * 25.0,
            battery: 60 + (rng.next() % 41) as i64,
            packets: rng.next() % 1000,
        })
        .collect();
    let mut batch = String::with_capacity(lines_per_batch * 120);
    let (mut lines, mut samples) = (0usize, 0u64);
    let mut late: Vec<String> = Vec::new();
    let mut t = plan.start_ms;
    while t < plan.end_ms {
        for (i, s) in sensors.iter_mut().enumerate() {
            s.temperature = (s.temperature + (rng.unit() - 0.5) * 0.3).clamp(-30.0, 60.0);
            s.humidity = (s.humidity + (rng.unit() - 0.5) * 1.0).clamp(0.0, 100.0);
            s.pressure = (s.pressure + (rng.unit() - 0.5) * 0.4).clamp(950.0, 1060.0);
            if rng.unit() < 0.002 {
                s.battery -= 1;
                if s.battery < 5 {
                    s.battery = 100;
                }
            }
            s.packets += 1 + rng.next() % 3;
            if rng.unit() < 0.02 {
                continue;
            }
            let ts = t + (rng.next() % 400) as i64 - 200;
            let line = format!(
                "iot,site=site{},sensor={} temperature={:.2},humidity={:.1},pressure={:.1},battery={}i,packets={}i {ts}\n",
                i % 20,
                sensor_name(i),
                s.temperature,
                s.humidity,
                s.pressure,
                s.battery,
                s.packets
            );
            if rng.unit() < 0.01 {
                late.push(line);
                continue;
            }
            batch.push_str(&line);
            lines += 1;
            samples += FIELDS.len() as u64;
            if lines >= lines_per_batch {
                for l in late.drain(..) {
                    batch.push_str(&l);
                    samples += FIELDS.len() as u64;
                }
                emit(std::mem::take(&mut batch), samples);
                (lines, samples) = (0, 0);
            }
        }
        t += plan.interval_ms;
    }
    for l in late.drain(..) {
        batch.push_str(&l);
        samples += FIELDS.len() as u64;
    }
    if !batch.is_empty() {
        emit(batch, samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_lines() {
        let plan = Plan {
            sensors: 7,
            start_ms: 1_700_000_000_000,
            end_ms: 1_700_000_600_000,
            interval_ms: 10_000,
            seed: 42,
        };
        let run = || {
            let mut out = Vec::new();
            generate(&plan, 50, |b, n| out.push((b, n)));
            out
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        let lines: usize = a.iter().map(|(b, _)| b.lines().count()).sum();
        let samples: u64 = a.iter().map(|(_, n)| n).sum();
        assert_eq!(samples, lines as u64 * 5);
        // 60 steps of 7 sensors, about 2 % missing.
        assert!((390..=420).contains(&lines), "{lines}");
        assert!(a[0].0.starts_with("iot,site=site"), "{}", a[0].0);
    }
}
