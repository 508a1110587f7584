"""``python -m runner.data fetch|check|verify-conversions``: the profiles' data from its public origins
(docs/data.md)."""
import sys

from runner.data.fetch import main

sys.exit(main())
