//! `zring bench --plot FILE.svg|png`: throughput over time (logical and physical
//! MiB/s per interval, and fio's average when compared) above the latency histogram
//! (share of operations per latency bin, log scale), drawn with plotters.

use std::path::Path;

use super::report::Report;
use crate::{CliError, CliResult};

/// The image formats `--plot` writes, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

/// The format of `path`, or a usage error (exit status 2) saying which extensions work.
pub fn check_path(path: &Path) -> CliResult<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let format = match ext.as_deref() {
        Some("svg") => Format::Svg,
        Some("png") => Format::Png,
        _ => {
            return Err(CliError::usage(format!(
                "{}: --plot writes .svg or .png files",
                path.display()
            )))
        }
    };
    if !cfg!(feature = "plot") {
        return Err(CliError::usage(
            "--plot: this zring was built without its `plot` feature",
        ));
    }
    Ok(format)
}

/// Draws the report's plot into `path`.
#[cfg(feature = "plot")]
pub fn draw(path: &Path, report: &Report<'_>) -> CliResult {
    use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};

    let format = check_path(path)?;
    fonts::register();
    let size = (900, 720);
    let drawn = match format {
        Format::Svg => charts::draw(SVGBackend::new(path, size).into_drawing_area(), report),
        Format::Png => charts::draw(BitMapBackend::new(path, size).into_drawing_area(), report),
    };
    drawn.map_err(|e| CliError::new(format!("{}: drawing the plot: {e}", path.display())))
}

/// Without the `plot` feature, `check_path` has already refused.
#[cfg(not(feature = "plot"))]
pub fn draw(path: &Path, _report: &Report<'_>) -> CliResult {
    check_path(path).map(|_| ())
}

#[cfg(feature = "plot")]
mod fonts {
    use std::sync::Once;

    /// Registers the embedded DejaVu Sans as plotters' "sans-serif", once.
    pub fn register() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // A failure leaves text unavailable; drawing then reports the error.
            let _ = plotters::style::register_font(
                "sans-serif",
                plotters::style::FontStyle::Normal,
                dejavu::sans::regular(),
            );
        });
    }
}

#[cfg(feature = "plot")]
mod charts {
    use plotters::coord::Shift;
    use plotters::prelude::*;

    use super::super::fio::fio_ran;
    use super::super::report::Report;
    use crate::output::MIB;

    /// Latency bins across the recorded range.
    const BINS: usize = 40;

    type Drawn = Result<(), String>;

    pub fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, rep: &Report<'_>) -> Drawn {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(380);
        throughput(&top, rep)?;
        latency(&bottom, rep)?;
        root.present().map_err(err)
    }

    fn throughput<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, rep: &Report<'_>) -> Drawn {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let points = rep.result.series.points();
        let fio = fio_ran(&rep.fio).map(|f| f.bytes_per_s / MIB);
        let t_max = points.last().map_or(1.0, |p| p.t_s).max(1e-3);
        let y_max = points
            .iter()
            .map(|p| p.logical_mib_per_s.max(p.physical_mib_per_s))
            .chain(fio)
            .fold(1.0f64, f64::max)
            * 1.1;
        let title = format!(
            "zring bench --mode {}: throughput over time ({} ms intervals)",
            rep.args.mode.name(),
            rep.result.series.interval().as_millis()
        );
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds into the timed run")
            .y_desc("MiB/s")
            .draw()
            .map_err(err)?;
        let logical: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.t_s, p.logical_mib_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(logical, BLUE.stroke_width(2)))
            .map_err(err)?
            .label("logical MiB/s (decoded bytes delivered)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        let differs = points
            .iter()
            .any(|p| (p.physical_mib_per_s - p.logical_mib_per_s).abs() > 1e-9);
        if differs {
            let physical: Vec<(f64, f64)> = points
                .iter()
                .map(|p| (p.t_s, p.physical_mib_per_s))
                .collect();
            chart
                .draw_series(LineSeries::new(physical, GREEN.stroke_width(2)))
                .map_err(err)?
                .label("physical MiB/s (stored bytes read)")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], GREEN.stroke_width(2))
                });
        }
        if let Some(f) = fio {
            chart
                .draw_series(LineSeries::new(
                    vec![(0.0, f), (t_max, f)],
                    RED.stroke_width(2),
                ))
                .map_err(err)?
                .label("fio, same job (average)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    }

    /// Labelled ticks of a log axis over `[lo, hi]`: the 1-2-5 values in it, or
    /// every 1..9 multiple when the range is too narrow for three of those.
    pub(super) fn key_points(lo: f64, hi: f64) -> Vec<f64> {
        let decades = lo.log10().floor() as i32..=hi.log10().ceil() as i32;
        let pick = |mantissas: &[f64]| -> Vec<f64> {
            decades
                .clone()
                .flat_map(|d| mantissas.iter().map(move |m| m * 10f64.powi(d)))
                .filter(|v| (lo..=hi).contains(v))
                .collect()
        };
        let coarse = pick(&[1.0, 2.0, 5.0]);
        if coarse.len() >= 3 {
            return coarse;
        }
        let fine = pick(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        if fine.len() >= 2 {
            fine
        } else {
            vec![lo, hi]
        }
    }

    fn latency<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, rep: &Report<'_>) -> Drawn {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let h = &rep.result.latency_ns;
        // Milliseconds when even the fastest operation took one.
        let (per_ns, unit) = if h.min().unwrap_or(0) >= 1_000_000 {
            (1e6, "milliseconds")
        } else {
            (1e3, "microseconds")
        };
        let (lo, hi) = match (h.min(), h.max()) {
            (Some(lo), Some(hi)) => (lo.max(1) as f64 / per_ns, hi.max(1) as f64 / per_ns),
            _ => (1.0, 10.0),
        };
        // Log-spaced bins over [lo, hi], widened when all values are nearly equal.
        let (lo, hi) = if hi / lo < 1.5 {
            (lo / 1.25, hi * 1.25)
        } else {
            (lo, hi * 1.0001)
        };
        let ratio = (hi / lo).powf(1.0 / BINS as f64);
        let edge = |k: usize| lo * ratio.powi(k as i32);
        let mut share = vec![0.0f64; BINS];
        let total = h.len().max(1) as f64;
        for (low, high, count) in h.buckets() {
            let mid = (low as f64 + high as f64) / 2.0 / per_ns;
            let k = ((mid / lo).ln() / ratio.ln())
                .floor()
                .clamp(0.0, BINS as f64 - 1.0);
            share[k as usize] += 100.0 * count as f64 / total;
        }
        let y_max = share.iter().copied().fold(1.0f64, f64::max) * 1.1;
        let what = match rep.args.mode.name() {
            "gather" => "per batch",
            "get" => "per get",
            _ => "consumer wait per step",
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("latency {what} ({} operations)", h.len()),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (lo..hi).log_scale().with_key_points(key_points(lo, hi)),
                0f64..y_max,
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|v| {
                if *v >= 10.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            })
            .x_desc(format!("{unit} (log scale)"))
            .y_desc("% of operations")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                share
                    .iter()
                    .enumerate()
                    .filter(|(_, &p)| p > 0.0)
                    .map(|(k, &p)| {
                        Rectangle::new([(edge(k), 0.0), (edge(k + 1), p)], BLUE.mix(0.6).filled())
                    }),
            )
            .map_err(err)?;
        Ok(())
    }
}

#[cfg(all(test, feature = "plot"))]
mod tests {
    use super::charts::key_points;
    use super::*;

    #[test]
    fn log_axes_get_readable_ticks_whatever_their_range() {
        assert_eq!(
            key_points(0.8, 120.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        let narrow = key_points(10_500.0, 35_000.0);
        assert_eq!(narrow, vec![20_000.0, 30_000.0]);
        assert_eq!(key_points(10_100.0, 10_200.0), vec![10_100.0, 10_200.0]);
    }

    #[test]
    fn plots_are_svg_or_png_by_extension() {
        assert_eq!(check_path(Path::new("a/b.SVG")).ok(), Some(Format::Svg));
        assert_eq!(check_path(Path::new("b.png")).ok(), Some(Format::Png));
        assert!(check_path(Path::new("b.jpg")).is_err());
        assert!(check_path(Path::new("noext")).is_err());
    }
}
