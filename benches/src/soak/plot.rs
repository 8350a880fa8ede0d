//! The soak's plot: get latency percentiles per period (log scale) above the
//! process's resident memory over time, as SVG.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::stats::{Period, Sample};
use super::SoakError;

type Drawn = Result<(), String>;
/// A plotted percentile: its name, its value in a period, its colour.
type Line = (&'static str, fn(&Period) -> f64, RGBColor);

/// Draws `periods` and `samples` into the SVG file `path`; `title` heads the plot.
pub fn draw(
    path: &Path,
    title: &str,
    period_s: f64,
    periods: &[Period],
    samples: &[Sample],
) -> Result<(), SoakError> {
    register_font();
    let root = SVGBackend::new(path, (900, 620)).into_drawing_area();
    let drawn = (|| {
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(400);
        latency(&top, title, period_s, periods)?;
        memory(&bottom, samples)?;
        root.present().map_err(err)
    })();
    drawn.map_err(|e| SoakError::Plot(format!("{}: {e}", path.display())))
}

/// Registers the embedded DejaVu Sans as plotters' "sans-serif": the text is laid
/// out with its metrics whatever fonts the machine has.
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A failure leaves text unavailable; drawing then reports the error.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

fn latency<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    period_s: f64,
    periods: &[Period],
) -> Drawn {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    // Periods are plotted at their end, in minutes when they are minutes.
    let unit = if period_s >= 60.0 { 60.0 } else { 1.0 };
    let x = |p: &Period| p.end_s / unit;
    let x_max = periods.iter().map(x).fold(1.0, f64::max);
    let lo = periods.iter().map(|p| p.p50_us).fold(f64::MAX, f64::min);
    let hi = periods.iter().map(|p| p.p999_us).fold(1.0, f64::max);
    let (lo, hi) = ((lo.min(hi) / 2.0).max(1.0), hi * 2.0);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(if unit == 60.0 { "minute" } else { "second" })
        .y_desc("get latency, us (log)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let lines: [Line; 3] = [
        ("p99.9", |p| p.p999_us, RED),
        ("p99", |p| p.p99_us, BLUE),
        ("p50", |p| p.p50_us, GREEN),
    ];
    for (name, value, color) in lines {
        let points: Vec<(f64, f64)> = periods.iter().map(|p| (x(p), value(p))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        // Between p99 and p50, where no line runs.
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn memory<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, samples: &[Sample]) -> Drawn {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let minutes = |s: &Sample| s.t_s as f64 / 60.0;
    let mib = |s: &Sample| s.res.rss_kib as f64 / 1024.0;
    let x_max = samples.iter().map(minutes).fold(1.0 / 60.0, f64::max);
    let y_max = samples.iter().map(mib).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("resident memory (VmRSS)", ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("minute")
        .y_desc("MiB")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (minutes(s), mib(s))).collect();
    chart
        .draw_series(LineSeries::new(points, BLACK.stroke_width(2)))
        .map_err(err)?;
    Ok(())
}
