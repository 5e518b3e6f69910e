import sys

from workstation.deploy import main

sys.exit(main())
