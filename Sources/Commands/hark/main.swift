import HarkApp

HarkCommand.start()
