"""The Dash dashboard: `create_app(data_dir)` in `factory`. Dash and Plotly load only when the app is built."""
