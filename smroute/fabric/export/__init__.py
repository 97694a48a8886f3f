"""What a fabric is written as: ibnetdiscover text, ibsim net
files, Slurm topology and pictures."""
