//! Statistics for experiments: Student-t confidence intervals over repeated
//! runs (different seeds) and Welch's unequal-variance t test.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A mean with the half width of its 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    pub mean: f64,
    /// `t(0.975, n-1) * s / sqrt(n)`; NaN when n < 2.
    pub half_width: f64,
    pub n: usize,
}

impl Ci {
    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }
    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }
}

/// Sample mean and sample variance (n - 1 denominator).
fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = if x.len() > 1 {
        x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)
    } else {
        f64::NAN
    };
    (mean, var)
}

/// Two-sided Student-t quantile `t(1 - alpha/2, df)`.
fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Mean and 95% confidence half width (Student t with n-1 degrees of
/// freedom). With n = 0 the mean is NaN; with n = 1 the half width is NaN
/// (no spread is known).
pub fn mean_ci95(samples: &[f64]) -> Ci {
    let n = samples.len();
    if n == 0 {
        return Ci {
            mean: f64::NAN,
            half_width: f64::NAN,
            n,
        };
    }
    let (mean, var) = mean_var(samples);
    let half_width = if n < 2 {
        f64::NAN
    } else {
        t_quantile(0.975, (n - 1) as f64) * (var / n as f64).sqrt()
    };
    Ci {
        mean,
        half_width,
        n,
    }
}

/// Welch's t test of equal means with unequal variances: returns
/// `(t, df, p)` with `t = (mean_a - mean_b) / sqrt(va/na + vb/nb)`, the
/// Welch–Satterthwaite degrees of freedom and the two-sided p value (as
/// `scipy.stats.ttest_ind(a, b, equal_var=False)`).
///
/// Either sample with fewer than two values gives NaNs. Two samples without
/// spread give `t = ±inf, p = 0` when the means differ and `t = 0, p = 1`
/// when they are equal (df is then NaN).
pub fn welch_t_test(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    if a.len() < 2 || b.len() < 2 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 == 0.0 {
        return if ma == mb {
            (0.0, f64::NAN, 1.0)
        } else {
            ((ma - mb).signum() * f64::INFINITY, f64::NAN, 0.0)
        };
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).min(1.0),
        Err(_) => f64::NAN,
    };
    (t, df, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values computed with mpmath at 30 digits (Student-t CDF via
    // the regularized incomplete beta function), identical to what
    // scipy.stats.t.ppf / scipy.stats.ttest_ind(equal_var=False) return:
    //   A = [12.1, 11.8, 12.6, 12.0, 11.5], B = [13.0, 12.7, 13.5, 12.9, 13.3, 12.8]
    //   t.ppf(0.975, 4) = 2.776445105197793
    //   mean(A) = 12.0, CI95 half width = 0.5043663003530605
    //   Welch: t = -4.678745621665613, df = 7.388178286029743, p = 0.0019607441028412429
    const A: [f64; 5] = [12.1, 11.8, 12.6, 12.0, 11.5];
    const B: [f64; 6] = [13.0, 12.7, 13.5, 12.9, 13.3, 12.8];

    #[test]
    fn t_quantile_known() {
        assert!((t_quantile(0.975, 4.0) - 2.776445105197793).abs() < 1e-9);
    }

    #[test]
    fn ci95_known() {
        let ci = mean_ci95(&A);
        assert_eq!(ci.n, 5);
        assert!((ci.mean - 12.0).abs() < 1e-12);
        assert!(
            (ci.half_width - 0.5043663003530605).abs() < 1e-9,
            "{}",
            ci.half_width
        );
        assert!(mean_ci95(&[1.0]).half_width.is_nan());
        assert!(mean_ci95(&[]).mean.is_nan());
    }

    #[test]
    fn welch_known() {
        let (t, df, p) = welch_t_test(&A, &B);
        assert!((t - -4.678745621665613).abs() < 1e-9, "{t}");
        assert!((df - 7.388178286029743).abs() < 1e-9, "{df}");
        assert!((p - 0.001_960_744_102_841_243).abs() < 1e-9, "{p}");
        // Symmetric.
        let (t2, df2, p2) = welch_t_test(&B, &A);
        assert!((t2 + t).abs() < 1e-12 && (df2 - df).abs() < 1e-12 && (p2 - p).abs() < 1e-12);
    }

    #[test]
    fn welch_degenerate() {
        assert_eq!(welch_t_test(&[1.0, 1.0], &[1.0, 1.0]).2, 1.0);
        let (t, _, p) = welch_t_test(&[1.0, 1.0], &[2.0, 2.0]);
        assert!(t.is_infinite() && t < 0.0 && p == 0.0);
        assert!(welch_t_test(&[1.0], &[1.0, 2.0]).0.is_nan());
    }
}
