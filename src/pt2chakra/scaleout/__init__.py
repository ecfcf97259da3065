"""Scale-out: a data-parallel job recorded on N ranks as the job on M ranks."""
