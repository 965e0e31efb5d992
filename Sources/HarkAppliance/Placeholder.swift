import HarkCore
