from pt2chakra.cli import run

run()
