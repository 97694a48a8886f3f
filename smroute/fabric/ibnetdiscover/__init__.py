"""Reading ibnetdiscover text: the ``-p`` ports report,
the ibdiagnet dialect and noise."""
