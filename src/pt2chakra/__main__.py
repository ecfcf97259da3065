import sys

from pt2chakra.cli import main

sys.exit(main())
