//! The SVG charts of `bench`. `bench report --plot`: the TBM and TTFM
//! distributions of every engine as complementary CDFs on log-log axes (the
//! fraction of samples at least x), so the tails — where engines differ most —
//! are as visible as the medians. `bench e2e --plot`: one small bar chart per
//! quantity, one bar per mode, since the quantities have different units.

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

/// One panel of [`draw_bars`]: a quantity, one value per series (`None`:
/// not measured, drawn as "n/a" rather than as a zero bar).
#[cfg(feature = "generate")]
pub struct BarPanel<'a> {
    pub title: &'a str,
    pub y_desc: &'a str,
    pub values: Vec<Option<f64>>,
    /// Decimals of the value written above each bar.
    pub decimals: usize,
    /// The axis's natural top (100 for a percentage), so that panels of
    /// different runs compare at a glance; `None`: from the tallest bar.
    pub full_scale: Option<f64>,
}

/// Panels of bars in rows of three under one caption and one legend that
/// names every series (its colour is the same in every panel).
#[cfg(feature = "generate")]
pub fn draw_bars(path: &str, caption: &str, series: &[&str], panels: &[BarPanel]) -> DrawResult {
    const COLUMNS: usize = 3;
    let rows = panels.len().div_ceil(COLUMNS).max(1);
    let height = 90 + 280 * rows as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(caption, ("sans-serif", 20))?;
    let (legend, grid) = root.split_vertically(40);
    let style: TextStyle = ("sans-serif", 16).into();
    let mut x = 20;
    for (i, name) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        legend.draw(&Rectangle::new([(x, 12), (x + 16, 28)], color.filled()))?;
        legend.draw(&Text::new(*name, (x + 22, 12), style.clone()))?;
        let (width, _) = legend.estimate_text_size(name, &style)?;
        x += 22 + width as i32 + 36;
    }
    for (area, panel) in grid.split_evenly((rows, COLUMNS)).iter().zip(panels) {
        bar_panel(area, panel)?;
    }
    root.present()?;
    Ok(())
}

#[cfg(feature = "generate")]
fn bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &BarPanel,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let n = panel.values.len().max(1);
    let tallest = panel.values.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
    let top = panel.full_scale.unwrap_or(tallest).max(tallest);
    // Room above the tallest bar for its value.
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(panel.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(8)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n as f64, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(panel.y_desc)
        .y_label_formatter(&|y| linear_label(*y))
        .light_line_style(TRANSPARENT)
        .draw()?;
    let label = ("sans-serif", 15)
        .into_font()
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (i, value) in panel.values.iter().enumerate() {
        let mid = i as f64 + 0.5;
        let color = COLORS[i % COLORS.len()];
        let text = match value {
            Some(v) => {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(mid - 0.35, 0.0), (mid + 0.35, *v)],
                    color.filled(),
                )))?;
                format!("{v:.*}", panel.decimals)
            }
            None => "n/a".to_string(),
        };
        let at = value.unwrap_or(0.0);
        chart.draw_series(std::iter::once(
            EmptyElement::at((mid, at)) + Text::new(text, (0, -4), label.clone()),
        ))?;
    }
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

/// A label of a linear axis: no exponents, no trailing ".0".
#[cfg(feature = "generate")]
fn linear_label(y: f64) -> String {
    if y.fract() == 0.0 || y.abs() >= 100.0 {
        format!("{y:.0}")
    } else {
        let s = format!("{y:.2}");
        s.trim_end_matches('0').to_string()
    }
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
