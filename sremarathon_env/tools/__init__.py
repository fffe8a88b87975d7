"""sremarathon_env tools package."""
