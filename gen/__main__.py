"""Lets `python3 gen <command>` run the generator from a source checkout."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fucina_gen.__main__ import main  # noqa: E402

sys.exit(main())
