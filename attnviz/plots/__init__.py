"""Plots: Plotly figure builders (they return ``go.Figure`` and never show one), split by
kind of chart, with the data functions public so tests check numbers, not pixels; and
``export`` (PNG/SVG through Chromium, HTML, atomic writes) and ``html`` (pages of figures for notebooks
and files, offline).

May import: attnviz.run.result (what a run holds), attnviz.core, attnviz.i18n. Never a view, a page
or the settings.
"""

from attnviz.plots.charts import (  # noqa: F401
    difference_figure,
    lines_figure,
    stacked_lines_figure,
    token_bars,
)
from attnviz.plots.data import (  # noqa: F401
    REGION,
    HeatmapData,
    grid_data,
    head_data,
    mask_data,
    matrix_data,
    max_pool,
    mean_data,
    output_data,
    pool_block,
    pooling_note,
    query_data,
    region_data,
)
from attnviz.plots.heatmaps import (  # noqa: F401
    BARS_UP_TO,
    LABEL_PITCH_PX,
    MASK_COLORS,
    PLOT_PX,
    TICK_PX,
    GridPlan,
    grid_figure,
    grid_layout,
    grid_plan,
    heatmap_figure,
    heatmap_trace,
    mask_figure,
    matrix_figure,
    matrix_height,
    output_figure,
    query_figure,
    thinning_note,
)
from attnviz.plots.images import (  # noqa: F401
    IMAGE_ABOVE_CELLS,
    image_figure,
    image_uri,
    png_data_uri,
    region_figure,
    rgb_table,
)
from attnviz.plots.modality import (  # noqa: F401
    graph_figure,
    overlay_figure,
    spectrogram_figure,
)
from attnviz.plots.style import (  # noqa: F401
    COLOR_SCALES,
    DEFAULT_MAX_CELLS,
    DIVERGING,
    THEMES,
    FigureStyle,
    axis_labels,
    colorscale,
    colour_bar,
    escape_label,
    figure,
    invisible_suffix,
    layout_for,
    plain_label,
    rows_down,
    template,
)
from attnviz.plots.ticks import EVERY_TICK_UP_TO  # noqa: F401
