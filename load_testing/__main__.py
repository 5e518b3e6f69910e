"""`python -m load_testing ...`: the load test alone (the same as `python -m model_build loadtest ...`)."""

import sys

from load_testing.loadtest import main

sys.exit(main())
