import sys

from pytest_searcheval.collection.cli import main

sys.exit(main())
