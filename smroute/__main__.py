import sys

from smroute.cli.main import main

sys.exit(main())
