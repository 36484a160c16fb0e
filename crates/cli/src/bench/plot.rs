//! `bench report --plot`: the TBM and TTFM distributions of every engine as
//! complementary CDFs on log-log axes (the fraction of samples at least x),
//! so the tails — where engines differ most — are as visible as the medians.

use super::report::Summary;
use plotters::prelude::*;

/// Distinct on white, colour-blind friendly (Okabe-Ito, without yellow).
const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(0, 0, 0),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

pub fn draw(path: &str, summaries: &[Summary]) -> DrawResult {
    let root = SVGBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(700);
    let tbm: Vec<(&str, Vec<f64>)> = summaries
        .iter()
        .map(|s| (s.engine.as_str(), s.tbm_us.clone()))
        .collect();
    let ttfm: Vec<(&str, Vec<f64>)> = summaries
        .iter()
        .map(|s| {
            (
                s.engine.as_str(),
                s.ttfm_us.iter().map(|us| us / 1000.0).collect(),
            )
        })
        .collect();
    panel(
        &left,
        "TBM: time per token (mask + check + commit)",
        "µs per token (log; below 1 ns drawn at 1 ns)",
        "fraction of tokens ≥ x (log)",
        &tbm,
        0.001,
    )?;
    panel(
        &right,
        "TTFM: compile time per schema",
        "ms per schema (log; timeouts at the limit; 0 µs drawn at 0.5 µs)",
        "fraction of schemas ≥ x (log)",
        &ttfm,
        0.0005,
    )?;
    root.present()?;
    Ok(())
}

/// Points of the complementary CDF of `sorted` (ascending, all > 0): for a
/// log-spaced set of ranks k from the top, (the k-th largest value, k/n).
/// Every one of the largest 100 values is kept, so the tail is exact.
pub fn ccdf_points(sorted: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted.len();
    let mut points = Vec::new();
    let mut k = 1usize;
    while k <= n {
        points.push((sorted[n - k], k as f64 / n as f64));
        k = if k < 100 {
            k + 1
        } else {
            (k + 1).max((k as f64 * 1.01) as usize)
        };
    }
    if points.last().is_some_and(|&(_, y)| y < 1.0) {
        points.push((sorted[0], 1.0));
    }
    points
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(&str, Vec<f64>)],
    floor: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let positive: Vec<(&str, Vec<f64>)> = series
        .iter()
        .map(|(name, v)| {
            (
                *name,
                // A log axis has no 0: the integer µs of a sub-µs compile,
                // or a timer tick of 0 ns, is drawn at the floor instead of
                // silently dropped. The input is sorted, so this stays sorted.
                v.iter()
                    .filter(|x| x.is_finite())
                    .map(|x| x.max(floor))
                    .collect(),
            )
        })
        .collect();
    let all = positive.iter().flat_map(|(_, v)| v.iter().copied());
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let (lo, hi) = if lo.is_finite() {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 10.0)
    };
    let n_max = positive
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let y_lo = 0.5 / n_max as f64;

    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), (y_lo..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| short_number(*x))
        .y_label_formatter(&|y| short_number(*y))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, (name, values)) in positive.iter().enumerate() {
        if values.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()].to_rgba();
        chart
            .draw_series(LineSeries::new(ccdf_points(values), color.stroke_width(2)))?
            .label(format!("{name} (n={})", values.len()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn short_number(x: f64) -> String {
    if !(0.01..1000.0).contains(&x) {
        format!("{x:.0e}")
    } else if x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccdf_keeps_the_tail_and_reaches_one() {
        let v: Vec<f64> = (1..=10_000).map(f64::from).collect();
        let p = ccdf_points(&v);
        assert_eq!(p[0], (10_000.0, 1e-4));
        assert_eq!(p[99], (9_901.0, 1e-2));
        assert_eq!(*p.last().unwrap(), (1.0, 1.0));
        assert!(p.len() < 700, "{} points", p.len());
        assert!(p.windows(2).all(|w| w[0].0 >= w[1].0 && w[0].1 < w[1].1));
    }
}
