import sys

from weights_staging.job import main

sys.exit(main())
