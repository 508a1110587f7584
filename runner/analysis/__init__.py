"""From finished runs to results: tables, figures, claims and their statistics, the page."""
