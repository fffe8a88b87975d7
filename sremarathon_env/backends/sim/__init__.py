"""sremarathon_env backends sim package."""
