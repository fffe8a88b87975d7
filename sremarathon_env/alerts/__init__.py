"""sremarathon_env alerts package."""
