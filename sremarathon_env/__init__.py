"""SRE-Marathon Gym: a Gymnasium environment for continuous, long-horizon SRE operation.

Importing the package registers the Gymnasium ids (once the environment exists); it imports no heavy
dependency (ray, torch, kubernetes, matplotlib) at import time.
"""

__version__ = "0.1.0"
