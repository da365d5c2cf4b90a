import sys

from bench.battery.run import main

sys.exit(main())
