import NMEA
