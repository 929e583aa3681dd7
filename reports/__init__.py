"""Run records to self-contained HTML reports, and the CI gate's comparison."""
