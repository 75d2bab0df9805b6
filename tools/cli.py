from plmr import __version__

print(__version__)
