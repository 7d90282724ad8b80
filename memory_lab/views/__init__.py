"""Views of results: the terminal's tables, the charts, the report's opening answer and the HTML
report."""
