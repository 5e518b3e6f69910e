"""Deploy and destroy one environment from a workstation (`make deploy ENV=...`, `make destroy ENV=...`)."""
